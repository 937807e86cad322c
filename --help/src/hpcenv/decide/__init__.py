"""Pure decisions: the torch variant (and its words), flash-attn, the plan."""

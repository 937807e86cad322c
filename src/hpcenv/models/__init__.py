"""Frozen data, no I/O: the facts of a node, the plan, probe results."""

#: PyTorch's wheel index (``torch_choice.TorchChoice.index_base``); here, so that what
#: only needs the URL (``decide.torch_variant``, an audit) creates no choice or plan type
DEFAULT_INDEX_URL = "https://download.pytorch.org/whl"

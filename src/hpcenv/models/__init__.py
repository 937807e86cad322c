"""Frozen data, no I/O: the facts of a node, the plan, probe results."""

#: PyTorch's wheel index (``plan.TorchChoice.index_base``); here, not in ``plan``, so that
#: what only needs the URL (``decide.torch_variant``, an audit) does not import the plan
DEFAULT_INDEX_URL = "https://download.pytorch.org/whl"

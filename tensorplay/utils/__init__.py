"""``tensorplay.utils``: ``tensorplay.utils.data`` (datasets and the ``DataLoader``), as ``torch.utils``."""

from tensorplay.utils import data

__all__ = ["data"]

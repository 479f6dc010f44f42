"""``tp.cuda``: the answers PyTorch scripts ask before choosing a device (tensorplay runs on the CPU only),
so ``device = "cuda" if tp.cuda.is_available() else "cpu"`` picks the CPU."""

from __future__ import annotations


def is_available() -> bool:
    """False: there is no CUDA device for tensorplay."""
    return False


def device_count() -> int:
    """0: there is no CUDA device for tensorplay."""
    return 0


__all__ = ["device_count", "is_available"]

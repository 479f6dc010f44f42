"""``tp.device``: PyTorch's device handle, for code that moves tensors and modules around.

tensorplay runs on the CPU only, so ``tp.device("cpu")`` (or ``"cpu:0"``) is the one device, and
``x.to("cpu")``, ``x.to(device)``, ``x.cpu()`` and ``module.to(device)`` are no-ops. Any other device
(``"cuda"``, ``"mps"``, ...) is a :class:`~tensorplay.errors.DeviceError` naming it, so a script
written for a GPU fails at the line that asks for one rather than later.
"""

from __future__ import annotations

from typing import Any

from tensorplay.errors import DeviceError


class device:  # noqa: N801 - PyTorch spelling
    """A device: ``tp.device("cpu")``, ``tp.device("cpu", 0)`` or ``tp.device("cpu:0")``.

    >>> import tensorplay as tp
    >>> tp.device("cpu")
    device(type='cpu')
    >>> tp.device("cpu") == tp.device("cpu:0") == "cpu"
    True
    """

    __slots__ = ("type", "index")
    type: str
    index: int | None

    def __init__(self, type: Any, index: int | None = None) -> None:  # noqa: A002 - PyTorch's name
        if isinstance(type, device):
            self.type = type.type
            self.index = type.index if index is None else index
            return
        if not isinstance(type, str):
            raise DeviceError(f"device: expected a device string such as 'cpu', got {type!r}")
        kind, _, number = type.partition(":")
        if kind != "cpu":
            raise DeviceError(f"device {type!r} is not available: tensorplay runs on the CPU only "
                              f"(use 'cpu', or drop the device argument)")
        if number:
            if not number.isdigit():
                raise DeviceError(f"device: invalid device string {type!r} (expected 'cpu' or 'cpu:<index>')")
            if index is not None and int(number) != index:
                raise DeviceError(f"device: {type!r} already names index {number}, got index={index} too")
            index = int(number)
        if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
            raise DeviceError(f"device: index must be a non-negative int, got {index!r}")
        self.type = "cpu"
        self.index = index

    def __repr__(self) -> str:
        return "device(type='cpu')" if self.index is None else f"device(type='cpu', index={self.index})"

    def __str__(self) -> str:
        return "cpu" if self.index is None else f"cpu:{self.index}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except DeviceError:
                return False
        return isinstance(other, device) and other.type == self.type

    def __hash__(self) -> int:
        return hash(self.type)


CPU = device("cpu")


def check_device(value: Any, where: str) -> device:
    """``value`` (a string or a :class:`device`) as the CPU device; anything else is a
    :class:`DeviceError` naming ``where``."""
    try:
        return value if isinstance(value, device) else device(value)
    except DeviceError as error:
        raise DeviceError(f"{where}: {error}") from None


def is_device(value: Any) -> bool:
    """Whether ``value`` names a device rather than a dtype (``x.to("cpu")`` vs ``x.to("float32")``)."""
    if isinstance(value, device):
        return True
    if not isinstance(value, str):
        return False
    kind = value.partition(":")[0]
    return kind in ("cpu", "cuda", "mps", "xpu", "xla", "meta", "hip", "ipu", "mtia", "vulkan", "hpu", "privateuseone")


def to_arguments(args: tuple[Any, ...], kwargs: dict[str, Any], where: str) -> Any:
    """The dtype asked for by PyTorch's ``to`` arguments (``to(dtype)``, ``to(device)``, ``to(device,
    dtype)``, ``to(other_tensor)``, ``dtype=``, ``device=``, ``non_blocking=``, ``copy=``), or ``None``
    when only a device is given. Devices are checked (:func:`check_device`) and otherwise ignored; an
    unexpected argument is a ``TypeError`` naming ``where``."""
    dtype = kwargs.pop("dtype", None)
    if "device" in kwargs:
        check_device(kwargs.pop("device"), where)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"{where}: unexpected keyword arguments {sorted(kwargs)}")
    if len(args) > 2:
        raise TypeError(f"{where}: expected to(dtype), to(device), to(device, dtype) or to(tensor), "
                        f"got {len(args)} positional arguments")
    for arg in args:
        if is_device(arg):
            check_device(arg, where)
        elif hasattr(arg, "_data") and hasattr(arg, "dtype") and not isinstance(arg, type):  # to(other)
            dtype = arg.dtype
        elif isinstance(arg, bool):  # to(dtype, non_blocking)
            continue
        else:
            dtype = arg
    return dtype

"""A mode that records every copy of host data to another device.

On a GPU each such copy outside a CUDA graph waits for its stream, and a graph cannot record one;
the meta device stands in for CUDA, so CPU tests can see them."""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode


class _MadeFromHostData(TorchFunctionMode):
    """``torch.tensor`` / ``torch.as_tensor`` of host data onto another device: the copy happens
    inside the factory, where no dispatch mode sees it."""

    def __init__(self, seen: list[str]) -> None:
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.tensor, torch.as_tensor) and kwargs.get("device") is not None:
            data = args[0] if args else kwargs.get("data")
            on_host = not isinstance(data, torch.Tensor) or data.device.type == "cpu"
            if on_host and torch.device(kwargs["device"]).type != "cpu":
                self.seen.append(f"torch.{func.__name__}")
        return func(*args, **kwargs)


class HostCopies(TorchDispatchMode):
    """Records in :attr:`seen` each copy from the CPU to another device (``_to_copy``, ``copy_``)
    and each tensor made there from host data (``torch.tensor(..., device=...)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self._factories = _MadeFromHostData(self.seen)

    def __enter__(self):
        self._factories.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._factories.__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        target = kwargs.get("device")
        if func in (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default) and tensors:
            source = tensors[-1].device
            dest = target if target is not None else tensors[0].device
            if source.type == "cpu" and torch.device(dest).type != "cpu":
                self.seen.append(str(func))
        return func(*args, **kwargs)

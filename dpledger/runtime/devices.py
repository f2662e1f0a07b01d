"""The torch device a method's ``device`` parameter names, checked before any work is done."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpledger.core.errors import InvalidParameterError

__all__ = ["torch_device"]

if TYPE_CHECKING:
    import torch


def torch_device(name: str) -> torch.device:
    """``torch.device(name)`` if this machine has it; else one error naming ``device``."""
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise InvalidParameterError(
            "device", f"{name!r} is not a torch device", "use 'cpu', 'cuda', 'cuda:N' or 'mps'"
        ) from None
    if device.type == "cpu":
        return device
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count and (device.index is None or device.index < count):
            return device
        where = "this torch build has no CUDA device" if not count else f"{count} CUDA device(s)"
        raise InvalidParameterError("device", f"{name!r} is not available ({where})", "use 'cpu'")
    if device.type == "mps" and torch.backends.mps.is_available():
        return device
    raise InvalidParameterError("device", f"{name!r} is not available here", "use 'cpu'")

"""A method's ``device`` parameter: an unknown or unavailable device is one error naming it."""

from __future__ import annotations

import pytest

from dpledger.core.errors import InvalidParameterError

torch = pytest.importorskip("torch")

from dpledger.runtime.devices import torch_device  # noqa: E402


def test_cpu_is_always_there() -> None:
    assert torch_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("name", ["gpu", "cuda:x", ""])
def test_unknown_devices_name_the_field(name: str) -> None:
    with pytest.raises(InvalidParameterError, match=r"device.*not a torch device"):
        torch_device(name)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_cpu_build_is_refused_with_the_fix() -> None:
    with pytest.raises(InvalidParameterError, match=r"device: 'cuda' is not available.*use 'cpu'"):
        torch_device("cuda")

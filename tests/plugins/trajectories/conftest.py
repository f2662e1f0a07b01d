from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ot")

#: the shared MNIST-stroke subset lives beside the repository (not vendored)
MNIST_STROKES = (
    Path(__file__).parents[3]
    / ".."
    / "shared"
    / "data"
    / "mnist_strokes"
    / "mnist_strokes_subset.npz"
)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Small tensors: threading only adds contention on a shared machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture
def mnist_path() -> Path:
    if not MNIST_STROKES.is_file():
        pytest.skip("MNIST-stroke subset not present beside the repository")
    return MNIST_STROKES

"""One BLAS thread inside the accountant's matrix work.

The accountant's matrix products are small and many: a second BLAS thread gains nothing on an
idle machine and, on a busy one, makes each product wait for a core (measured 3–90× slower
beside two busy processes). :func:`one_blas_thread` limits the BLAS libraries numpy loaded to
one thread for the duration of a block and restores them after.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import numpy as np  # noqa: F401  (loads numpy's BLAS before the controller looks for it)
from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread"]


@functools.lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with one BLAS thread (restored on exit, also on error)."""
    with _controller().limit(limits=1, user_api="blas"):
        yield

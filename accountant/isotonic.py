"""Weighted isotonic regression (pool adjacent violators) without importing ``scipy.optimize``.

The dominated pairs of :mod:`~dpledger.accountant.pld_dominated` lower their points to the
greatest convex minorant, the isotonic regression of the segments' slopes. SciPy computes it
in compiled code (``scipy.optimize.isotonic_regression``), but importing ``scipy.optimize``
loads its whole package, about a quarter of a second, every process that builds a dominated
pair (each command line call, each clean room). Here SciPy's compiled core is loaded from its
own file without the package, checked on fixed inputs with known answers, and the public
function is used whenever it cannot be (another SciPy layout, or a core that answers
differently). Nothing certified rests on the result: the pairs built from it are checked
point by point against the true curve.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["isotonic_regression"]

#: the compiled core's module, inside SciPy's ``optimize`` package
_CORE = "scipy.optimize._pava_pybind"

#: inputs and their isotonic regressions (values, block starts), which a loaded core must give:
#: one pool, one pool among others, and a pool that must merge back into the block before it
_KNOWN = (
    ((3.0, 1.0, 2.0), (1.0, 1.0, 1.0), (2.0, 2.0, 2.0), (0, 3)),
    ((1.0, 3.0, 2.0, 4.0), (1.0, 2.0, 1.0, 1.0), (1.0, 8 / 3, 8 / 3, 4.0), (0, 1, 3, 4)),
    ((2.0, 3.0, 0.0), (1.0, 1.0, 1.0), (5 / 3, 5 / 3, 5 / 3), (0, 3)),
)

Array = NDArray[np.float64]
Starts = NDArray[np.intp]
Core = Callable[[Array, Array, Starts], tuple[Array, Array, Starts, int]]


def _core_file() -> str | None:
    """The compiled core's file in the installed SciPy, None when there is none."""
    import scipy

    folder = os.path.join(os.path.dirname(scipy.__file__), "optimize")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_pava_pybind" + suffix)
        if os.path.isfile(path):
            return path
    return None


def _run(core: Core, y: Array, weights: Array) -> tuple[Array, Starts]:
    """(values, block starts) of ``core`` on copies of the inputs (it works in place)."""
    x = np.array(y, dtype=np.float64, order="C", copy=True)
    w = np.array(weights, dtype=np.float64, order="C", copy=True)
    starts = np.full(x.size + 1, -1, dtype=np.intp)
    values, _, starts, count = core(x, w, starts)
    return np.asarray(values, dtype=np.float64), np.asarray(starts[: int(count) + 1], dtype=np.intp)


@functools.lru_cache(maxsize=1)
def _loaded_core() -> Core | None:
    """SciPy's compiled PAVA loaded from its file, or None when it cannot be loaded or does not
    answer the known inputs exactly."""
    try:
        path = _core_file()
        spec = None if path is None else importlib.util.spec_from_file_location(_CORE, path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        core: Core = module.pava
        return core if answers_known_inputs(core) else None
    except Exception:  # any failure leaves the public function
        return None


def answers_known_inputs(core: Core) -> bool:
    """Whether ``core`` gives the known regressions of ``_KNOWN`` exactly."""
    for y, w, values, starts in _KNOWN:
        got_values, got_starts = _run(core, np.array(y), np.array(w))
        if not (np.array_equal(got_values, values) and np.array_equal(got_starts, starts)):
            return False
    return True


def _public(y: Array, weights: Array) -> tuple[Array, Starts]:
    from scipy.optimize import isotonic_regression as regression

    found = regression(y, weights=weights)
    return np.asarray(found.x, dtype=np.float64), np.asarray(found.blocks, dtype=np.intp)


def isotonic_regression(y: Array, weights: Array) -> tuple[Array, Starts]:
    """(values, block starts) of the weighted isotonic (non-decreasing) regression of ``y``:
    what ``scipy.optimize.isotonic_regression(y, weights=weights)`` gives as ``x`` and
    ``blocks`` (and the errors it raises: inputs the compiled core does not check, such as
    lengths that differ or weights that are not positive, go to it)."""
    core = _loaded_core()
    values, scale = np.asarray(y), np.asarray(weights)
    if core is None or values.ndim != 1 or scale.shape != values.shape or not np.all(scale > 0):
        return _public(y, weights)
    try:
        return _run(core, values, scale)
    except Exception:  # a core that fails on these inputs: the public function answers
        return _public(y, weights)

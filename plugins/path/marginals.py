"""Marginals of flat records and Private-PGM estimation with ``mbi`` 2.0 (imported lazily).

A marginal over a clique is a count vector; adding or removing one flat record (= one user, see
:mod:`dpledger.plugins.path.flatten`) changes exactly one cell by 1, so ``k`` marginals stacked
into one vector have add/remove L2 sensitivity ``sqrt(k)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpledger.plugins.path.flatten import FlatSpec

Clique = tuple[str, ...]


def mbi() -> Any:
    """Import ``mbi`` after configuring JAX (64-bit, no compilation cache: no import warnings)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    import mbi as _mbi

    return _mbi


def marginal(records: dict[str, np.ndarray], spec: FlatSpec, clique: Clique) -> np.ndarray:
    """Counts of ``clique`` (C-order over the attributes' domains), flattened to 1-D."""
    sizes = dict(zip(spec.attributes, spec.shape, strict=True))
    shape = tuple(sizes[a] for a in clique)
    n = len(records[spec.attributes[0]])
    if n == 0:
        return np.zeros(int(np.prod(shape)), dtype=float)
    idx = np.ravel_multi_index(tuple(records[a] for a in clique), shape)
    return np.bincount(idx, minlength=int(np.prod(shape))).astype(float)


def measure_stacked(
    records: dict[str, np.ndarray],
    spec: FlatSpec,
    cliques: Sequence[Clique],
    noise_multiplier: float,
    ledger: Any,
    step: str,
) -> list[tuple[Clique, np.ndarray, float]]:
    """One Gaussian release of all ``cliques`` stacked (L2 sensitivity ``sqrt(k)``).

    Returns ``(clique, noisy counts, per-cell std)`` per clique.
    """
    answers = [marginal(records, spec, cl) for cl in cliques]
    sens = math.sqrt(len(cliques))
    noisy = ledger.gaussian(np.concatenate(answers), sens, noise_multiplier, step=step)
    out = []
    start = 0
    for cl, a in zip(cliques, answers, strict=True):
        out.append((tuple(cl), np.asarray(noisy[start : start + a.size]), noise_multiplier * sens))
        start += a.size
    return out


def domain(spec: FlatSpec) -> Any:
    return mbi().Domain(spec.attributes, spec.shape)


def estimate(
    spec: FlatSpec,
    measurements: Sequence[tuple[Clique, np.ndarray, float]],
    iters: int,
    warm_start: Any = None,
) -> Any:
    """Private-PGM (mirror descent) fit of a graphical model to the noisy marginals."""
    m = mbi()
    dom = domain(spec)
    lms = [m.LinearMeasurement(np.asarray(y), cl, stddev=float(s)) for cl, y, s in measurements]
    return m.estimation.MirrorDescent().estimate(dom, lms, iters=iters, warm_start=warm_start)


def model_marginal(model: Any, clique: Clique) -> np.ndarray:
    """The model's counts on ``clique`` (1-D, same order as :func:`marginal`)."""
    return np.asarray(model.project(tuple(clique)).datavector(), dtype=float)


def synthesize(model: Any, spec: FlatSpec, n: int, seed: int) -> dict[str, np.ndarray]:
    """``n`` flat records sampled from the model (post-processing)."""
    state = np.random.get_state()  # mbi samples with numpy's global generator
    np.random.seed(seed % 2**32)
    try:
        data = model.synthetic_data(int(n))
    finally:
        np.random.set_state(state)
    cols = data.to_dict()
    return {a: np.asarray(cols[a], dtype=np.int64) for a in spec.attributes}

"""The selection primitives of the runtime ledger: the exponential mechanism, report-noisy-max
and one-shot noisy top-k, and the epsilon a selection spends under a relation and a unit.

The functions here back the methods of the same names of
:class:`~dpledger.runtime.ledger.PrivacyLedger` (whose docstrings are the reference). Each books
its event through the ledger's public scope API (``ledger.book``) before it draws.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import ExponentialMechanismEvent, ReportNoisyMaxEvent, SelfComposedEvent
from dpledger.runtime.ledger_arguments import FloatArray, check_step, finite_array, positive
from dpledger.runtime.ledger_units import rows_of_one_unit

if TYPE_CHECKING:
    from dpledger.runtime.ledger import PrivacyLedger

__all__ = [
    "exponential_mechanism",
    "ledger_selection_epsilon",
    "noisy_top_k",
    "report_noisy_max",
    "selection_epsilon",
]


def selection_epsilon(epsilon: float, adjacency: Adjacency) -> float:
    """The epsilon of a selection mechanism whose parameter is ``epsilon`` and whose scores have
    add/remove sensitivity as stated, under ``adjacency``'s relation (rounded up)."""
    factor = adjacency.sensitivity_factor
    if factor == 1.0:
        return float(epsilon)
    value = factor * float(epsilon)
    return math.nextafter(value, math.inf) if value < math.inf else value


def ledger_selection_epsilon(ledger: PrivacyLedger, epsilon: float, step: str) -> float:
    """The epsilon a selection step spends under the ledger's relation and unit.

    ``sensitivity`` is the add/remove bound of every score for one row; replacing a record
    can move a score by twice that, so under replace-one the mechanism at parameter
    ``epsilon`` is ``2 * epsilon``-DP (rounded up); on a user-level ledger one unit moves a
    score by its rows' share (``ledger.bound_units``). The booked event states the epsilon
    for the declared unit under the relation.
    """
    k = rows_of_one_unit(ledger, step)
    eps = selection_epsilon(epsilon, ledger.adjacency)
    return eps if k == 1 else math.nextafter(eps * k, math.inf)


def _scores(scores: Any) -> FloatArray:
    arr = finite_array("scores", scores)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidParameterError("scores", "must be a non-empty 1-D array", "pass a vector")
    return arr


def _booked_selection(
    ledger: PrivacyLedger,
    kind: type[ExponentialMechanismEvent] | type[ReportNoisyMaxEvent],
    scores: Any,
    sensitivity: float,
    epsilon: float,
    step: str,
    monotonic: bool,
) -> tuple[FloatArray, float]:
    """The checked scores and the noise scale of a selection, once its event is booked."""
    step = check_step(step)
    s = positive("sensitivity", sensitivity)
    eps = positive("epsilon", epsilon)
    arr = _scores(scores)
    ledger.book(kind(ledger_selection_epsilon(ledger, eps, step)), step, {"sensitivity": s})
    return arr, (1.0 if monotonic else 2.0) * s / eps


def exponential_mechanism(
    ledger: PrivacyLedger,
    scores: Any,
    sensitivity: float,
    epsilon: float,
    *,
    step: str,
    monotonic: bool,
) -> int:
    """An index drawn by the exponential mechanism (Gumbel-max trick)."""
    args = (scores, sensitivity, epsilon, step, monotonic)
    arr, scale = _booked_selection(ledger, ExponentialMechanismEvent, *args)
    return int(np.argmax(arr / scale + ledger.rng.gumbel(size=arr.shape)))


def report_noisy_max(
    ledger: PrivacyLedger,
    scores: Any,
    sensitivity: float,
    epsilon: float,
    *,
    step: str,
    monotonic: bool,
) -> int:
    """The argmax of the scores plus Laplace noise."""
    args = (scores, sensitivity, epsilon, step, monotonic)
    arr, scale = _booked_selection(ledger, ReportNoisyMaxEvent, *args)
    return int(np.argmax(arr + ledger.rng.laplace(0.0, scale, size=arr.shape)))


def noisy_top_k(
    ledger: PrivacyLedger,
    scores: Any,
    sensitivity: float,
    epsilon: float,
    k: int,
    *,
    step: str,
    monotonic: bool,
) -> NDArray[np.int64]:
    """The top ``k`` indices of the scores plus Gumbel noise (one shot)."""
    step = check_step(step)
    s = positive("sensitivity", sensitivity)
    eps = positive("epsilon", epsilon)
    arr = _scores(scores)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= arr.size:
        raise InvalidParameterError(
            "k",
            f"must be in [1, {arr.size}], got {k!r}",
            "pick at most as many as there are candidates",
        )
    ledger.book(
        SelfComposedEvent(
            ExponentialMechanismEvent(ledger_selection_epsilon(ledger, eps, step)), int(k)
        ),
        step,
        {"sensitivity": s, "k": int(k)},
    )
    scale = (1.0 if monotonic else 2.0) * s / eps
    noisy = arr / scale + ledger.rng.gumbel(size=arr.shape)
    return np.argsort(-noisy, kind="stable")[: int(k)].astype(np.int64)

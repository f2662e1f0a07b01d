"""The numbers of a private partition selection that an engine executes, and its certified
bound: one source for the noise, the threshold and the release probabilities, so that what the
accountant certifies (:class:`~dpledger.core.events.PartitionSelectionEvent`, bounded by the
events of :func:`dpledger.core.partition_events.dominating_event`) is what runs."""

from __future__ import annotations

from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import PartitionSelectionEvent
from dpledger.core.partition_selection import (
    check_selection,
    release_probability,
    selection_parameters,
)

__all__ = [
    "partition_selection_threshold",
    "selection_epsilon",
    "selection_release_probability",
]


def _checked(mechanism: str, epsilon: float, delta: float, max_partitions: int) -> None:
    check_selection(mechanism, float(epsilon), float(delta), max_partitions)


def partition_selection_threshold(
    mechanism: str, epsilon: float, delta: float, max_partitions: int
) -> tuple[float, float]:
    """``(noise_scale, threshold)``: a key held by ``n`` users is released when
    ``n + noise >= threshold``, the noise Laplace of scale ``noise_scale`` (``laplace``) or
    Gaussian of standard deviation ``noise_scale`` (``gaussian``), drawn afresh per key. For
    ``truncated_geometric`` a key of ``n`` users is released with probability
    :func:`selection_release_probability` (``threshold`` is then the least count released
    surely, ``noise_scale`` the geometric's scale ``k / epsilon``)."""
    _checked(mechanism, epsilon, delta, max_partitions)
    return selection_parameters(mechanism, float(epsilon), float(delta), max_partitions)


def selection_release_probability(
    mechanism: str, epsilon: float, delta: float, max_partitions: int, count: int
) -> float:
    """The probability that the rule releases a key held by ``count`` users."""
    _checked(mechanism, epsilon, delta, max_partitions)
    if isinstance(count, bool) or not isinstance(count, int):
        raise InvalidParameterError("count", f"must be an integer, got {count!r}", "pass n >= 0")
    return release_probability(mechanism, float(epsilon), float(delta), max_partitions, count)


def selection_epsilon(
    mechanism: str, epsilon: float, delta: float, max_partitions: int, at_delta: float
) -> EpsilonBound:
    """The certified epsilon at ``at_delta`` of the selection alone, per user (add/remove)."""
    event = PartitionSelectionEvent(mechanism, epsilon, delta, max_partitions)
    bound = account(event, Adjacency(), delta=at_delta).bound
    assert isinstance(bound, EpsilonBound)
    return bound

"""The SHK method's event: a pure-DP release whose epsilon decays with the flow's running time.

A plugin mechanism (registered by :mod:`dpledger.plugins.shk.plugin`): the accountants see it
lowered to :class:`~dpledger.core.events.PureDPEvent` of its epsilon, rounded up, and the
ledger covers an executed instance by a declared one of no smaller epsilon.
"""

from __future__ import annotations

import math
from typing import ClassVar

import attrs

from dpledger.plugin import Event, PureDPEvent, nonnegative_finite, positive_finite, to_float


@attrs.frozen
class TimeProfiledPureDPEvent(Event):
    """A pure-DP release whose epsilon depends on how long a flow ran before it was sampled.

    ``epsilon = floor_epsilon + transient_epsilon * exp(-decay_rate * time)``: e.g. a sample
    of an exponential mechanism's law after running a contracting flow (a Langevin or
    birth-death flow) for time ``time`` from an initial law whose log-density oscillation is
    bounded, where ``floor_epsilon`` is the target's own epsilon. Accountants treat it as
    :class:`PureDPEvent` with that epsilon, rounded up (:meth:`to_core`).
    """

    kind: ClassVar[str] = "time_profiled_pure_dp"
    floor_epsilon: float = attrs.field(validator=nonnegative_finite, converter=to_float)
    transient_epsilon: float = attrs.field(validator=nonnegative_finite, converter=to_float)
    time: float = attrs.field(validator=nonnegative_finite, converter=to_float)
    decay_rate: float = attrs.field(default=1.0, validator=positive_finite, converter=to_float)

    @property
    def epsilon(self) -> float:
        """The epsilon at ``time``, rounded up to a float that is never below the real value."""
        if self.transient_epsilon == 0.0:
            return self.floor_epsilon
        up = math.inf
        exponent = math.nextafter(self.decay_rate * self.time, -up)  # rounded product, made lower
        factor = math.nextafter(math.nextafter(math.exp(-exponent), up), up)  # exp within 1 ulp
        value = math.nextafter(self.transient_epsilon * factor, up)
        return math.nextafter(self.floor_epsilon + value, up)

    def covers(self, executed: Event) -> bool:
        """A declared instance covers an executed one of no larger epsilon (pure DP at a
        smaller epsilon is pure DP at a larger one)."""
        return isinstance(executed, TimeProfiledPureDPEvent) and executed.epsilon <= self.epsilon

    def to_core(self) -> PureDPEvent:
        """The pure-DP event the accountants compose: epsilon at ``time``, rounded up."""
        return PureDPEvent(self.epsilon)

"""Plugin mechanism events lowered onto core events, with the mechanism specs the plugins
register (the mapping itself is :mod:`dpledger.runtime.lowering`)."""

from __future__ import annotations

from collections.abc import Sequence

from dpledger.core.adjacency import Adjacency
from dpledger.core.events import EVENT_KINDS, Event
from dpledger.core.specs import MechanismSpec
from dpledger.runtime.lowering import lower_event
from dpledger.runtime.plugin_demand import OnDemandLoader
from dpledger.runtime.plugin_loading import failed_to_load, not_found
from dpledger.runtime.plugin_specs import SpecCollector, certify, conflict_error

__all__ = ["MechanismLowering"]


class MechanismLowering:
    """Lowers events with the mechanisms of ``specs``, loading a third-party distribution
    through ``loader`` for an event kind no loaded plugin provides."""

    def __init__(self, specs: SpecCollector, loader: OnDemandLoader) -> None:
        self.specs = specs
        self.loader = loader

    def lower(self, event: Event, adjacency: Adjacency | None = None) -> Event:
        """Replace every plugin mechanism event by its (at least as lossy) core mapping.

        A mechanism with only a privacy profile becomes its profile tabulated under
        ``adjacency`` (see :func:`~dpledger.runtime.lowering.profile_to_core`), which the PLD
        accountant composes as a privacy-loss distribution.
        """
        by_class = {spec.event_class: spec for spec in self.specs.mechanisms().values()}
        unknown = [
            n
            for n in event.walk()
            if EVENT_KINDS.core.get(n.kind) is not type(n) and type(n) not in by_class
        ]
        if unknown and self.loader.load(kinds=sorted({n.kind for n in unknown})):
            by_class = {spec.event_class: spec for spec in self.specs.mechanisms().values()}
            self._refuse_missing([n for n in unknown if type(n) not in by_class])
        certify(self.specs.pm)
        clashes = self.specs.clashes("dpledger_register_mechanisms")
        for node in event.walk():
            claimants = clashes.get(f"kind:{node.kind}")
            if claimants and any(
                isinstance(node, c.event_class) for c in claimants if isinstance(c, MechanismSpec)
            ):
                raise conflict_error("event", f"event kind {node.kind!r}", claimants)
        return lower_event(event, by_class, depth=0, adjacency=adjacency or Adjacency())

    def _refuse_missing(self, missing: Sequence[Event]) -> None:
        """An event kind still unknown while a third-party plugin failed to load: name it."""
        failed = failed_to_load(self.specs.problems(), self.specs.pm.origins)
        if missing and failed:
            kinds = sorted(m.kind for m in self.specs.mechanisms().values())
            raise not_found("event", f"mechanism for event kind {missing[0].kind!r}", kinds, failed)

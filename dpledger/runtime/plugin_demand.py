"""Third-party plugins loaded on demand: a distribution is loaded only when a method or event
kind that no builtin plugin provides is asked for, and only if one of its plugins registers it
(as its check in a subprocess, :mod:`dpledger.runtime.plugin_probe`, reported)."""

from __future__ import annotations

from collections.abc import Sequence

from dpledger.runtime.plugin_loading import DPLedgerPluginManager, load_entry_points
from dpledger.runtime.plugin_specs import SpecCollector

__all__ = ["OnDemandLoader"]


class OnDemandLoader:
    """Loads into ``pm`` the third-party distributions that provide a name asked for, while
    ``pending`` (a host built on a manager that already loaded them has nothing pending)."""

    def __init__(self, pm: DPLedgerPluginManager, specs: SpecCollector, *, pending: bool) -> None:
        self.pm = pm
        self.specs = specs
        self.pending = pending

    def load(self, methods: Sequence[str] = (), kinds: Sequence[str] = ()) -> bool:
        """Load the third-party distributions that provide one of these method names or event
        kinds; True if any plugin was tried or failed its check (the specs are then collected
        again)."""
        if not self.pending:
            return False
        before = (len(self.pm.attempted), len(self.pm.problems))
        load_entry_points(
            self.pm,
            allow=self.pm.allow,
            block=self.pm.block,
            which="third_party",
            wanted=lambda found: found.provides(methods, kinds),
        )
        if (len(self.pm.attempted), len(self.pm.problems)) == before:
            return False
        self.specs.invalidate()
        return True

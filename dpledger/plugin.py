"""The public API for writing a dpledger plugin: import everything a plugin needs from here.

A plugin registers specs (:class:`MethodSpec`, :class:`MechanismSpec`,
:class:`ReportSectionSpec`) through hooks marked :data:`hookimpl`. A method declares the privacy
event it may spend, built from the core events, the adjacency and (for a method that protects
users itself) a :class:`Declaration`; its ``run(params, data, ledger, rng)`` draws every bit of
noise and every sample through a :class:`Ledger`. Parameter classes validate their fields with
the validators below and raise :class:`InvalidParameterError`. The calibration and accounting
functions let a method size its noise from a target (they load the accountant when first used),
and :func:`run_verified` and :class:`PrivacyLedger` run a method outside dpledger's host (in a
test, or a driver of its own).

Tests of a plugin use dpledger's pytest plugin, :mod:`dpledger.runtime.testing` (fixtures and
contract classes; enabled once dpledger is installed). It is not re-exported here: it imports
pytest, and this module is imported wherever a plugin is, the clean room included.

Stability
---------

Everything named in ``__all__`` is the public plugin API, and within a major version (``1.x``):

* a name in ``__all__`` is never removed or renamed, and keeps its kind (class, function,
  constant, type alias);
* a function or method keeps its parameters (names, order, whether keyword-only, defaults);
  new parameters are keyword-only with a default that keeps the old behaviour;
* a spec or event class keeps its fields and their meaning, and an event keeps its ``kind``
  and its dictionary form (:meth:`Event.to_dict`), so that run records stay readable; new
  fields come with defaults;
* an error class keeps its base classes, so an ``except`` clause that catches it keeps doing so;
* the :class:`Ledger` protocol keeps every member; a new member comes with a minor release,
  and a plugin that does not call it is unaffected.

A name is deprecated before it goes: it keeps working, every use emits a
``DeprecationWarning`` that names its replacement, it stays for at least one minor release,
and it is removed only in the next major release. The changelog lists every deprecation.

Not covered: anything not in ``__all__``, and every other module of dpledger
(``dpledger.core.*``, ``dpledger.runtime.*``, ``dpledger.accountant.*``, ...), whose names may
move or change in any release even where this module re-exports them from there; import them
from here. The numbers the accountants certify may tighten in any release (they stay certified
upper bounds). :mod:`dpledger.runtime.testing` is the testing API, with the same rules for its
fixtures and contract classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpledger.core.adjacency import RELATIONS, UNITS, Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.errors import (
    DPLedgerError,
    InvalidParameterError,
    LedgerViolationError,
    PluginError,
    UnsupportedEventError,
)
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)
from dpledger.core.hookspecs import hookimpl
from dpledger.core.ledger_protocol import Epoch, Ledger, SampleScope, UnitKeys
from dpledger.core.specs import (
    DeclareFn,
    DiagnoseFn,
    Example,
    ExampleFn,
    MechanismSpec,
    MethodSpec,
    PairFn,
    ProfileFn,
    ProofRef,
    RDPFn,
    RenderFn,
    ReportSectionSpec,
    RunFn,
    ToCoreFn,
)
from dpledger.core.validation import (
    is_number,
    nonnegative_finite,
    nonnegative_int,
    one_of,
    positive_finite,
    positive_int,
    probability,
    to_float,
)

if TYPE_CHECKING:
    from dpledger.accountant.calibrate import (
        analytic_gaussian_sigma,
        calibrate_noise_multiplier,
        calibrate_on_grid,
    )
    from dpledger.accountant.select import account
    from dpledger.runtime.ledger import PrivacyLedger, selection_epsilon
    from dpledger.runtime.runner import RunResult, run_verified

__all__ = [
    "RELATIONS",
    "UNITS",
    "Adjacency",
    "ApproxDPEvent",
    "ComposedEvent",
    "DPLedgerError",
    "Declaration",
    "DeclareFn",
    "DiagnoseFn",
    "Epoch",
    "Event",
    "Example",
    "ExampleFn",
    "ExponentialMechanismEvent",
    "GaussianEvent",
    "InvalidParameterError",
    "LaplaceEvent",
    "Ledger",
    "LedgerViolationError",
    "MechanismSpec",
    "MethodSpec",
    "NoOpEvent",
    "NonPrivateEvent",
    "PairFn",
    "PluginError",
    "PoissonSampledEvent",
    "PrivacyLedger",
    "ProfileFn",
    "ProofRef",
    "PureDPEvent",
    "RDPFn",
    "RandomAllocationEvent",
    "RandomizedResponseEvent",
    "RenderFn",
    "ReportNoisyMaxEvent",
    "ReportSectionSpec",
    "RunFn",
    "RunResult",
    "SampleScope",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ShuffledBatchesEvent",
    "ToCoreFn",
    "UnitKeys",
    "UnsupportedEventError",
    "account",
    "analytic_gaussian_sigma",
    "calibrate_noise_multiplier",
    "calibrate_on_grid",
    "hookimpl",
    "is_number",
    "nonnegative_finite",
    "nonnegative_int",
    "one_of",
    "positive_finite",
    "positive_int",
    "probability",
    "run_verified",
    "selection_epsilon",
    "to_float",
]


def _accountant(name: str) -> Any:
    if name == "account":
        from dpledger.accountant.select import account

        return account
    from dpledger.accountant import calibrate

    return getattr(calibrate, name)


def _runtime(name: str) -> Any:
    if name in ("run_verified", "RunResult"):
        from dpledger.runtime import runner

        return getattr(runner, name)
    from dpledger.runtime import ledger

    return getattr(ledger, name)


#: names loaded when first used, so that importing a plugin loads the kernel only
_LAZY = {
    "account": _accountant,
    "analytic_gaussian_sigma": _accountant,
    "calibrate_noise_multiplier": _accountant,
    "calibrate_on_grid": _accountant,
    "PrivacyLedger": _runtime,
    "selection_epsilon": _runtime,
    "run_verified": _runtime,
    "RunResult": _runtime,
}


def __getattr__(name: str) -> Any:
    """The lazily loaded names of ``__all__`` (not cached: this module's namespace never
    changes after import)."""
    load = _LAZY.get(name)
    if load is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return load(name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

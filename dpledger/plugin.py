"""The public API for writing a dpledger plugin: import everything a plugin needs from here.

A plugin registers specs (:class:`MethodSpec`, :class:`MechanismSpec`,
:class:`ReportSectionSpec`) through hooks marked :data:`hookimpl`. A method declares the privacy
event it may spend, built from the core events, the adjacency and (for a method that protects
users itself) a :class:`Declaration`; its ``run(params, data, ledger, rng)`` draws every bit of
noise and every sample through a :class:`Ledger`. Parameter classes validate their fields with
the validators below and raise :class:`InvalidParameterError`. A method may name the rule that
builds the neighbouring datasets ``dpledger audit`` runs it on (``MethodSpec(neighbours=...)``, a
:data:`NeighbourRule`; reusable ones: :func:`per_record`, :func:`query_answer`, ...). The
calibration and accounting functions let a method size its noise from a target, and
:func:`run_verified` and :class:`PrivacyLedger` run a method outside dpledger's host (in a
test, or a driver of its own); these load the accountant or the runtime when first used.

Tests of a plugin use dpledger's pytest plugin, :mod:`dpledger.runtime.testing` (fixtures and
contract classes; enabled once dpledger is installed). It is not re-exported here: it imports
pytest, and this module is imported wherever a plugin is, the clean room included.

Stability
---------

Everything named in ``__all__`` is the public plugin API, and within a major version:

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
from here. :mod:`dpledger.runtime.testing` is the testing API, with the same rules for its
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
    PartitionSelectionEvent,
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
from dpledger.core.neighbours import NeighbourPair, NeighbourRule
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
    from dpledger.runtime.devices import torch_device
    from dpledger.runtime.engines import (
        aggregate_table,
        aggregation_events,
        aggregation_request,
    )
    from dpledger.runtime.ledger import PrivacyLedger, selection_epsilon
    from dpledger.runtime.neighbour_rules import (
        ball_marginals,
        circle_antipode,
        nn_records,
        per_record,
        query_answer,
        score_vector,
        unit_rows,
        user_tables,
    )
    from dpledger.runtime.runner import RunResult, run_verified
    from dpledger.runtime.votes import vote_histogram

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
    "NeighbourPair",
    "NeighbourRule",
    "NoOpEvent",
    "NonPrivateEvent",
    "PairFn",
    "PartitionSelectionEvent",
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
    "aggregate_table",
    "aggregation_events",
    "aggregation_request",
    "analytic_gaussian_sigma",
    "ball_marginals",
    "calibrate_noise_multiplier",
    "calibrate_on_grid",
    "circle_antipode",
    "hookimpl",
    "is_number",
    "nn_records",
    "nonnegative_finite",
    "nonnegative_int",
    "one_of",
    "per_record",
    "positive_finite",
    "positive_int",
    "probability",
    "query_answer",
    "run_verified",
    "score_vector",
    "selection_epsilon",
    "to_float",
    "torch_device",
    "unit_rows",
    "user_tables",
    "vote_histogram",
]


#: names loaded when first used (by the module that defines them), so that importing a plugin
#: loads the kernel only
_ACCOUNTING = frozenset(
    {"account", "analytic_gaussian_sigma", "calibrate_noise_multiplier", "calibrate_on_grid"}
)
_NEIGHBOUR_RULES = frozenset(
    {
        "ball_marginals",
        "circle_antipode",
        "nn_records",
        "per_record",
        "query_answer",
        "score_vector",
        "unit_rows",
        "user_tables",
    }
)
_RUNNING = frozenset({"PrivacyLedger", "RunResult", "run_verified", "selection_epsilon"})
#: helpers shared by methods: a checked torch device, the exact nearest-neighbour votes
_HELPERS = {"torch_device": "dpledger.runtime.devices", "vote_histogram": "dpledger.runtime.votes"}
#: DP aggregations over tables on an engine (in memory, Dask, Spark)
_HELPERS.update(
    dict.fromkeys(
        ("aggregate_table", "aggregation_events", "aggregation_request"),
        "dpledger.runtime.engines",
    )
)


def __getattr__(name: str) -> Any:
    """The lazily loaded names of ``__all__`` (not cached: this module's namespace never
    changes after import)."""
    if name in _ACCOUNTING:
        from dpledger.accountant import calibrate, select

        return getattr(select if name == "account" else calibrate, name)
    if name in _NEIGHBOUR_RULES:
        from dpledger.runtime import neighbour_rules

        return getattr(neighbour_rules, name)
    if name in _RUNNING:
        from dpledger.runtime import ledger, runner

        return getattr(ledger if name in ("PrivacyLedger", "selection_epsilon") else runner, name)
    if name in _HELPERS:
        import importlib

        return getattr(importlib.import_module(_HELPERS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

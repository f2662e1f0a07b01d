"""A pytest plugin for plugin authors: fixtures and contract base classes.

Enabled by the ``pytest11`` entry point ``dpledger = "dpledger.runtime.testing"``. Subclass the
contracts in a test module (name the subclass ``Test...``)::

    class TestMyMethod(MethodPluginContract):
        spec = MY_SPEC
        valid_params = {"noise_multiplier": 1.0}
        bad_params = [{"noise_multiplier": -1.0}]

        def make_data(self, rng):
            return rng.normal(size=(50, 3))
"""

from __future__ import annotations

import contextlib
import itertools
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    EVENT_KINDS,
    Event,
    TabulatedProfileEvent,
    TabulatedRDPEvent,
    event_from_dict,
)
from dpledger.core.specs import CORE_EVENT_KINDS, MechanismSpec, MethodSpec
from dpledger.runtime.lowering import pair_to_core, rdp_to_core
from dpledger.runtime.plugin_manager import DPLedgerPluginManager, PluginHost, make_plugin_manager
from dpledger.runtime.runner import declare_checked, run_verified

#: modules a declaration (or a mechanism's accountant characterisation) must not import
HEAVY_MODULES: tuple[str, ...] = ("torch", "ot")


class _Forbidden:
    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in self.names:
            raise ImportError(f"{name} may not be imported here (accounting must run without it)")


@contextlib.contextmanager
def forbid_imports(*names: str) -> Iterator[None]:
    """Make ``import name`` (and submodules) fail inside the block, even if already imported."""
    names = names or HEAVY_MODULES
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in names}
    finder = _Forbidden(names)
    sys.meta_path.insert(0, finder)
    for key in saved:
        sys.modules[key] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for key in [k for k in sys.modules if k.split(".")[0] in names]:
            del sys.modules[key]
        sys.modules.update(saved)


@pytest.fixture
def dpledger_pm() -> DPLedgerPluginManager:
    """A fresh plugin manager that loads no entry points."""
    return make_plugin_manager(load_entrypoints=False, allow=None, block=[])


@pytest.fixture
def dpledger_register(
    dpledger_pm: DPLedgerPluginManager,
) -> Callable[..., contextlib.AbstractContextManager[PluginHost]]:
    """``with dpledger_register(module, name="x") as host:`` registers and always unregisters."""

    @contextlib.contextmanager
    def register(plugin: object, *, name: str) -> Iterator[PluginHost]:
        host = PluginHost(dpledger_pm)
        host.register(plugin, name=name)
        try:
            yield host
        finally:
            host.unregister(name)

    return register


def _check_event_tree(event: Any) -> None:
    assert isinstance(event, Event), f"expected an Event, got {type(event).__name__}"
    for node in event.walk():
        assert attrs.has(type(node)), f"{type(node).__name__} is not an attrs event"
        assert EVENT_KINDS.get(node.kind) is type(node), f"kind {node.kind!r} is not registered"


class MethodPluginContract:
    """Checks every method plugin must pass. Set ``spec`` and ``valid_params``; define
    ``make_data(rng)``; list parameter overrides that must be refused in ``bad_params``."""

    spec: ClassVar[MethodSpec]
    valid_params: ClassVar[Mapping[str, Any]] = {}
    bad_params: ClassVar[Sequence[Mapping[str, Any]]] = ()
    adjacencies: ClassVar[Sequence[Adjacency]] = (Adjacency(), Adjacency(relation="replace_one"))
    #: the executed steps must equal the declared ones (False: may spend less than declared)
    exact: ClassVar[bool] = True
    seed: ClassVar[int] = 20240601

    def make_data(self, rng: np.random.Generator) -> Any:
        raise NotImplementedError("define make_data(rng) returning a small dataset")

    def _params(self) -> Any:
        return self.spec.make_params(self.valid_params)

    def test_spec_is_complete(self) -> None:
        assert isinstance(self.spec, MethodSpec)
        assert self.spec.proof.citation.strip()
        assert self.spec.description.strip()

    def test_declare_returns_valid_event(self) -> None:
        params = self._params()
        for adjacency in self.adjacencies:
            answer = self.spec.declare(params, adjacency)
            declaration = declare_checked(self.spec, params, adjacency)
            event = declaration.event
            _check_event_tree(event)
            if all(node.kind in CORE_EVENT_KINDS for node in event.walk()):
                assert event_from_dict(event.to_dict()) == event
            assert answer == self.spec.declare(params, adjacency), "declare is not deterministic"
            if declaration.unit == "user":
                assert adjacency.unit == "user", "a user-level event needs user-level adjacency"

    def test_declare_does_not_import_torch(self) -> None:
        params = self._params()
        with forbid_imports(*HEAVY_MODULES):
            for adjacency in self.adjacencies:
                self.spec.declare(params, adjacency)

    def test_run_matches_declaration(self) -> None:
        params = self._params()
        for adjacency in self.adjacencies:
            data = self.make_data(np.random.default_rng(self.seed))
            result = run_verified(self.spec, params, data, adjacency=adjacency, seed=self.seed)
            assert result.outputs, "run returned no outputs"
            if self.exact:
                assert result.ledger.matches_exactly(), (
                    f"declared {result.declared.describe()} but executed "
                    f"{result.ledger.executed_event().describe()} (noise drawn outside the ledger?)"
                )

    def test_run_is_reproducible(self) -> None:
        params = self._params()
        runs = [
            run_verified(
                self.spec,
                params,
                self.make_data(np.random.default_rng(self.seed)),
                adjacency=self.adjacencies[0],
                seed=self.seed,
            ).outputs
            for _ in range(2)
        ]
        for key in runs[0]:
            np.testing.assert_array_equal(np.asarray(runs[0][key]), np.asarray(runs[1][key]))

    def test_bad_params_raise(self) -> None:
        if not self.bad_params:
            pytest.skip("no bad_params listed")
        for bad in self.bad_params:
            with pytest.raises(InvalidParameterError):
                self.spec.make_params({**self.valid_params, **bad})


class MechanismSpecContract:
    """Checks every mechanism spec must pass. Set ``spec``, ``example_events`` (instances of
    the new event) and ``bad_event_kwargs`` (constructor arguments that must be refused)."""

    spec: ClassVar[MechanismSpec]
    example_events: ClassVar[Sequence[Event]] = ()
    bad_event_kwargs: ClassVar[Sequence[Mapping[str, Any]]] = ()
    adjacencies: ClassVar[Sequence[Adjacency]] = (Adjacency(), Adjacency(relation="replace_one"))
    epsilons: ClassVar[Sequence[float]] = (0.0, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0)

    def test_spec_is_complete(self) -> None:
        assert isinstance(self.spec, MechanismSpec)
        assert self.spec.proof.citation.strip()
        assert self.spec.kind not in CORE_EVENT_KINDS
        assert self.example_events, "list at least one example event"

    def test_event_is_a_leaf_that_round_trips(self) -> None:
        for event in self.example_events:
            assert isinstance(event, self.spec.event_class)
            assert event.children() == ()
            assert event_from_dict(event.to_dict()) == event

    def test_to_core_maps_onto_core_events(self) -> None:
        if self.spec.to_core is None:
            pytest.skip("no to_core mapping")
        with forbid_imports(*HEAVY_MODULES):
            for event in self.example_events:
                mapped = self.spec.to_core(event)
                assert isinstance(mapped, Event)
                assert all(node.kind in CORE_EVENT_KINDS for node in mapped.walk())

    def test_privacy_profile_is_a_valid_profile(self) -> None:
        profile = self.spec.privacy_profile
        if profile is None:
            pytest.skip("no privacy profile")
        with forbid_imports(*HEAVY_MODULES):
            for event in self.example_events:
                for adjacency in self.adjacencies:
                    deltas = [profile(event, adjacency, eps) for eps in self.epsilons]
                    assert all(0.0 <= d <= 1.0 and not math.isnan(d) for d in deltas)
                    assert all(a >= b for a, b in itertools.pairwise(deltas)), (
                        "delta(epsilon) must be non-increasing"
                    )

    def test_dominating_pair_is_a_pair_of_laws(self) -> None:
        pair = self.spec.dominating_pair
        if pair is None:
            pytest.skip("no dominating pair")
        with forbid_imports(*HEAVY_MODULES):
            for event in self.example_events:
                for adjacency in self.adjacencies:
                    losses, masses, inf_mass = pair(event, adjacency)
                    assert len(losses) == len(masses) and 0.0 <= inf_mass <= 1.0
                    assert all(m >= 0 and math.isfinite(m) for m in masses)
                    assert math.fsum(masses) + inf_mass <= 1.0 + 1e-12
                    q_total = math.fsum(
                        m * math.exp(-x) for x, m in zip(losses, masses, strict=True)
                    )
                    assert q_total <= 1.0 + 1e-12

    def test_tight_pair_is_a_pair_of_probability_laws(self) -> None:
        """A pair declared tight (``pair_is_tight``) is a pair of probability laws whose curve
        the table holds, as the accountant reads it (:func:`~dpledger.runtime.lowering.
        pair_to_core`)."""
        if not self.spec.pair_is_tight:
            pytest.skip("no pair declared tight")
        with forbid_imports(*HEAVY_MODULES):
            for event in self.example_events:
                for adjacency in self.adjacencies:
                    table = pair_to_core(self.spec, event, adjacency)
                    assert isinstance(table, TabulatedProfileEvent)
                    assert table.tight_losses is not None and table.tight_claim

    def test_rdp_curve_is_a_valid_curve(self) -> None:
        """The curve as the accountant reads it: at its orders, real numbers, not NaN,
        non-negative and non-decreasing (:func:`~dpledger.runtime.lowering.rdp_to_core`)."""
        if self.spec.rdp_curve is None:
            pytest.skip("no RDP curve")
        with forbid_imports(*HEAVY_MODULES):
            for event in self.example_events:
                for adjacency in self.adjacencies:
                    table = rdp_to_core(self.spec, event, adjacency)
                    assert isinstance(table, TabulatedRDPEvent)
                    assert table.relation == adjacency.relation

    def test_bad_params_raise(self) -> None:
        if not self.bad_event_kwargs:
            pytest.skip("no bad_event_kwargs listed")
        for kwargs in self.bad_event_kwargs:
            with pytest.raises(InvalidParameterError):
                self.spec.event_class(**kwargs)

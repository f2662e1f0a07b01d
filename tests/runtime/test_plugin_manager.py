"""PluginHost: direct registration, duplicates, provenance, mechanism lowering, builtins."""

from __future__ import annotations

import math
import tomllib
import types
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from dpledger.core.errors import InvalidParameterError, PluginError
from dpledger.core.events import (
    EVENT_KINDS,
    ComposedEvent,
    Event,
    GaussianEvent,
    PureDPEvent,
    SelfComposedEvent,
)
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MechanismSpec, MethodSpec
from dpledger.core.validation import positive_finite
from dpledger.plugins.primitives import PRIMITIVE_MODULES, gaussian, laplace
from dpledger.runtime import testing as _testing
from dpledger.runtime.plugin_manager import (
    PluginHost,
    PluginOrigin,
    load_entry_points,
    make_plugin_manager,
    register_plugin,
)
from dpledger.runtime.testing import MechanismSpecContract

ROOT = Path(__file__).resolve().parents[2]


@attrs.frozen
class PureStaircaseEvent(Event):
    """A pure epsilon-DP leaf used to test plugin mechanisms."""

    kind: ClassVar[str] = "test_pure_staircase"
    epsilon: float = attrs.field(validator=positive_finite)


def _rr_profile(event: Event, adjacency: Any, eps: float) -> float:
    """Worst-case delta(eps) of any pure e0-DP mechanism (binary randomized response)."""
    assert isinstance(event, PureStaircaseEvent)
    e0 = event.epsilon * (2.0 if adjacency.relation == "replace_one" else 1.0)
    return max(0.0, (math.exp(e0) - math.exp(eps)) / (1.0 + math.exp(e0)))


def _rr_pair(event: Event, adjacency: Any) -> tuple[list[float], list[float], float]:
    """Binary randomized response at the event's epsilon: the tight pair of pure e0-DP."""
    assert isinstance(event, PureStaircaseEvent)
    e0 = event.epsilon * (2.0 if adjacency.relation == "replace_one" else 1.0)
    top = math.exp(e0) / (1.0 + math.exp(e0))
    return [e0, -e0], [top, 1.0 - top], 0.0


STAIRCASE = MechanismSpec(
    name="pure_staircase",
    event_class=PureStaircaseEvent,
    description="staircase mechanism, pure epsilon-DP",
    proof="Geng & Viswanath 2014, Theorem 3; Kairouz, Oh & Viswanath 2015 (worst-case profile)",
    to_core=lambda e: PureDPEvent(e.epsilon),  # type: ignore[attr-defined]
    privacy_profile=_rr_profile,
    dominating_pair=_rr_pair,
)

# fixtures (also provided by the pytest11 plugin once dpledger is installed)
dpledger_pm = _testing.dpledger_pm
dpledger_register = _testing.dpledger_register


def _module(name: str, **hooks: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    for key, fn in hooks.items():
        setattr(mod, key, hookimpl(fn))
    return mod


def test_direct_registration_and_unregistration(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    with dpledger_register(gaussian, name="g") as host:
        spec = host.method("gaussian_mechanism")
        assert spec.provenance is not None
        assert (spec.provenance.plugin, spec.provenance.distribution, spec.provenance.tier) == (
            "g",
            None,
            "unverified",
        )
    assert host.methods() == {}
    assert not host.pm.has_plugin("g")


def test_unknown_method_lists_available(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    with (
        dpledger_register(laplace, name="l") as host,
        pytest.raises(InvalidParameterError, match="laplace_mechanism"),
    ):
        host.method("gausian_mechanism")


def test_builtin_wins_a_duplicate_name_regardless_of_order(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    impostor = _module(
        "aaa_impostor",
        dpledger_register_methods=lambda register: register(
            attrs.evolve(laplace.SPEC, description="impostor")
        ),
    )
    register_plugin(dpledger_pm, impostor, name="aaa")
    register_plugin(
        dpledger_pm,
        laplace,
        name="zzz-builtin",
        origin=PluginOrigin("zzz-builtin", "dpledger", "0.1.0", None, "contrib"),
    )
    host = PluginHost(dpledger_pm)
    spec = host.method("laplace_mechanism")
    assert spec.description != "impostor" and spec.provenance is not None
    assert spec.provenance.tier == "contrib"
    [problem] = host.problems()
    assert problem.plugin == "aaa" and problem.stage == "duplicate"
    assert "'zzz-builtin' (dpledger)" in problem.message


def test_plugin_name_and_object_duplicates(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    assert register_plugin(dpledger_pm, gaussian, name="g")
    assert not register_plugin(dpledger_pm, laplace, name="g")
    assert not register_plugin(dpledger_pm, gaussian, name="g2")
    stages = [(p.plugin, p.stage) for p in dpledger_pm.problems]
    assert stages == [("g", "duplicate"), ("g2", "duplicate")]


def test_hook_with_unexpected_argument_is_a_register_problem(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    bad = _module("bad_args", dpledger_register_methods=lambda register, extra: None)
    assert not register_plugin(dpledger_pm, bad, name="bad")
    assert "extra" in dpledger_pm.problems[0].message


def test_mechanism_lowering_and_spec_checks(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    mod = _module("stair", dpledger_register_mechanisms=lambda register: register(STAIRCASE))
    host = PluginHost(dpledger_pm)
    host.register(mod, name="stair")
    assert set(host.mechanisms()) == {"pure_staircase"}
    event = ComposedEvent([SelfComposedEvent(PureStaircaseEvent(0.5), 3), GaussianEvent(1.0)])
    lowered = host.lower(event)
    assert lowered == ComposedEvent([SelfComposedEvent(PureDPEvent(0.5), 3), GaussianEvent(1.0)])
    profile_only = attrs.evolve(STAIRCASE, to_core=None, dominating_pair=None, provenance=None)
    host.unregister("stair")
    host.register(
        _module("p", dpledger_register_mechanisms=lambda register: register(profile_only)), name="p"
    )
    # profile only: the profile tabulated up to the grid epsilon where it reaches zero, whose
    # coarsening is pure DP there
    from dpledger.core.events import TabulatedProfileEvent

    lowered = host.lower(PureStaircaseEvent(1.0))
    assert isinstance(lowered, TabulatedProfileEvent) and lowered.deltas[-1] == 0.0
    coarse = lowered.coarsened()
    assert isinstance(coarse, PureDPEvent)
    assert 1.0 <= coarse.epsilon <= 1.0 * 1.03


def test_mechanism_spec_validation() -> None:
    with pytest.raises(InvalidParameterError, match="at least one accountant"):
        MechanismSpec(name="x", event_class=PureStaircaseEvent, description="d", proof="p")

    with pytest.raises(InvalidParameterError, match="already defined"):

        @attrs.frozen
        class Impostor(Event):  # events are never redefined: refused at class creation
            kind: ClassVar[str] = "gaussian"
            noise_multiplier: float = 1.0

    assert EVENT_KINDS["gaussian"] is GaussianEvent
    with pytest.raises(InvalidParameterError, match="attrs class"):
        MethodSpec(
            name="m",
            params=dict,
            declare=lambda p, a: GaussianEvent(1.0),
            run=lambda *a: {},
            description="d",
            proof="p",
        )


class TestStaircaseContract(MechanismSpecContract):
    spec = STAIRCASE
    example_events = (PureStaircaseEvent(0.5), PureStaircaseEvent(2.0))
    bad_event_kwargs = ({"epsilon": -1.0}, {"epsilon": math.inf})


def test_rr_profile_values() -> None:
    # e0 = 1: delta(0) = (e - 1)/(e + 1) = tanh(1/2)
    assert _rr_profile(PureStaircaseEvent(1.0), make_adj(), 0.0) == pytest.approx(
        math.tanh(0.5), rel=1e-14
    )
    assert _rr_profile(PureStaircaseEvent(1.0), make_adj(), 1.0) == 0.0


def make_adj() -> Any:
    from dpledger.core.adjacency import Adjacency

    return Adjacency()


def _builtin_entry_points() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(data["project"].get("entry-points", {}).get("dpledger", {}))


def test_the_builtin_list_is_what_pyproject_announces() -> None:
    from dpledger.runtime.plugin_loading import BUILTIN_PLUGINS

    assert _builtin_entry_points() == BUILTIN_PLUGINS


def test_every_primitive_module_is_an_entry_point_of_dpledger() -> None:
    eps = _builtin_entry_points()
    targets = set(eps.values())
    missing = [m for m in PRIMITIVE_MODULES if f"dpledger.plugins.primitives.{m}" not in targets]
    assert not missing, f"add to [project.entry-points.dpledger]: {missing}"


def test_builtins_load_from_their_list_not_from_installed_metadata(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    # installed entry points that repeat the builtin ones (dpledger's own metadata) are skipped
    eps = [
        metadata.EntryPoint(f"primitives.{m}", f"dpledger.plugins.primitives.{m}", "dpledger")
        for m in PRIMITIVE_MODULES
    ]
    load_entry_points(dpledger_pm, entry_points=eps, which="third_party")
    assert dpledger_pm.get_plugins() == set()
    load_entry_points(dpledger_pm, entry_points=[], which="builtin")
    host = PluginHost(dpledger_pm)
    assert host.problems() == ()
    assert {
        "gaussian_mechanism",
        "laplace_mechanism",
        "private_mean",
        "private_histogram",
        "exponential_mechanism",
        "report_noisy_max",
        "noisy_top_k",
        "nn_vote_selection",
        "dp_sgd_logistic",
        "trajectories",
        "shk",
        "path",
    } <= set(host.methods())
    assert all(s.provenance.tier == "contrib" for s in host.methods().values())


def test_make_plugin_manager_has_no_side_effects_without_entry_points() -> None:
    pm = make_plugin_manager(load_entrypoints=False)
    assert pm.get_plugins() == set() and pm.problems == []


def test_profile_only_mechanism_is_charged_by_its_profile() -> None:
    """A profile-only mechanism becomes its profile tabulated up to where it is 0 (here never),
    whose coarsening is (eps, delta)-DP at the first grid epsilon where delta is at most
    PROFILE_DELTA; a profile that is not a probability is a plugin error."""
    from dpledger.core.events import ApproxDPEvent, TabulatedProfileEvent
    from dpledger.core.specs import Provenance
    from dpledger.runtime.plugin_manager import PROFILE_DELTA, PROFILE_EPSILONS, profile_to_core

    def gaussian_like(event: Event, adjacency: Any, eps: float) -> float:
        return math.exp(-eps)  # certified by assumption in this test

    spec = attrs.evolve(
        STAIRCASE,
        to_core=None,
        privacy_profile=gaussian_like,
        provenance=Provenance("p", None, None, "unverified"),
    )
    core = profile_to_core(spec, PureStaircaseEvent(1.0), make_adj())
    assert isinstance(core, TabulatedProfileEvent) and core.name == spec.name
    assert core.epsilons == PROFILE_EPSILONS and core.relation == "add_remove"
    assert core.deltas == tuple(math.exp(-e) for e in PROFILE_EPSILONS)
    coarse = core.coarsened()
    assert isinstance(coarse, ApproxDPEvent) and coarse.delta <= PROFILE_DELTA
    assert math.exp(-coarse.epsilon) <= PROFILE_DELTA < math.exp(-coarse.epsilon / 1.03)

    broken = attrs.evolve(spec, privacy_profile=lambda e, a, eps: 2.0)
    with pytest.raises(PluginError, match="not a probability"):
        profile_to_core(broken, PureStaircaseEvent(1.0), make_adj())


ON_DEMAND = """
from typing import ClassVar

import attrs
from dpledger.core.events import Event, LaplaceEvent, PureDPEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MechanismSpec, MethodSpec


@attrs.frozen
class P:
    noise_multiplier: float = 2.0


@attrs.frozen
class OdEvent(Event):
    kind: ClassVar[str] = "od_pure"
    epsilon: float = 1.0


@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="od_count", params=P,
                        declare=lambda p, a: LaplaceEvent(p.noise_multiplier),
                        run=lambda p, d, ledger, rng: {}, description="a count",
                        proof="Dwork et al. 2006, Prop. 1"))


@hookimpl
def dpledger_register_mechanisms(register):
    register(MechanismSpec(name="od_pure", event_class=OdEvent, description="pure",
                           proof="by definition", to_core=lambda e: PureDPEvent(e.epsilon)))
"""


def test_on_demand_host_loads_third_party_plugins_only_when_needed(make_dist) -> None:  # type: ignore[no-untyped-def]
    import sys

    make_dist("od-plugin", "0.1", {"rt_on_demand": ON_DEMAND}, {"od": "rt_on_demand"})
    host = PluginHost.on_demand()
    spec = host.method("laplace_mechanism")
    assert spec.provenance is not None and spec.provenance.distribution == "dpledger"
    assert host.lower(GaussianEvent(1.0)) == GaussianEvent(1.0)
    assert "rt_on_demand" not in sys.modules  # builtin names and core kinds need no plugin
    spec = host.method("od_count")
    assert spec.provenance is not None and spec.provenance.distribution == "od-plugin"
    # lowering a plugin event kind loads the third-party plugins as well
    event = sys.modules["rt_on_demand"].OdEvent(0.5)
    fresh = PluginHost.on_demand()
    assert fresh.lower(ComposedEvent([event, GaussianEvent(1.0)])) == ComposedEvent(
        [PureDPEvent(0.5), GaussianEvent(1.0)]
    )


def test_on_demand_host_respects_the_block_list(make_dist) -> None:  # type: ignore[no-untyped-def]
    make_dist("od-plugin", "0.1", {"rt_on_demand": ON_DEMAND}, {"od": "rt_on_demand"})
    host = PluginHost.on_demand(block=["od-plugin"])
    with pytest.raises(InvalidParameterError, match="no method named 'od_count'"):
        host.method("od_count")
    assert ("od", "blocked") in host.pm.skipped


def test_load_entry_points_names_its_groups(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError, match="which"):
        load_entry_points(dpledger_pm, entry_points=[], which="everything")


def test_a_dominating_pair_is_composed_as_its_exact_curve() -> None:
    """A pair-only mechanism becomes its curve tabulated at its own losses, which is exact; ten
    compositions land within 1 % above the exact (Kairouz-Oh-Viswanath) value."""
    from dpledger.accountant.closed_form import ClosedFormAccountant
    from dpledger.accountant.pld import PLDAccountant
    from dpledger.core.events import SelfComposedEvent, TabulatedProfileEvent
    from dpledger.core.specs import Provenance
    from dpledger.runtime.lowering import pair_to_core

    spec = attrs.evolve(
        STAIRCASE,
        to_core=None,
        privacy_profile=None,
        dominating_pair=_rr_pair,
        provenance=Provenance("p", None, None, "unverified"),
    )
    core = pair_to_core(spec, PureStaircaseEvent(0.5), make_adj())
    assert isinstance(core, TabulatedProfileEvent) and core.epsilons == (0.0, 0.5)
    for eps, delta in zip(core.epsilons, core.deltas, strict=True):
        exact = _rr_profile(PureStaircaseEvent(0.5), make_adj(), eps)
        assert exact <= delta <= exact * (1 + 1e-9)
    pld = PLDAccountant()
    pld.compose(SelfComposedEvent(core, 10))
    exact_acc = ClosedFormAccountant()
    exact_acc.compose(SelfComposedEvent(PureDPEvent(0.5), 10))
    got = pld.get_epsilon(1e-5).epsilon
    want = exact_acc.get_epsilon(1e-5).epsilon
    assert want * (1 - 1e-9) <= got <= want * 1.01
    assert spec.to_dict()["characterisations"] == ["dominating_pair"]


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        (([1.0, -1.0], [0.9, 0.5], 0.0), "P-masses summing above 1"),
        (([1.0, -3.0], [0.5, 0.5], 0.0), "Q-masses"),
        (([1.0, float("nan")], [0.5, 0.5], 0.0), "not finite"),
        (([1.0], [0.5, 0.5], 0.0), "different shapes"),
    ],
)
def test_an_impossible_dominating_pair_is_a_plugin_error(pair: Any, message: str) -> None:
    from dpledger.core.specs import Provenance
    from dpledger.runtime.lowering import pair_to_core

    spec = attrs.evolve(
        STAIRCASE,
        to_core=None,
        dominating_pair=lambda event, adjacency: pair,
        provenance=Provenance("p", None, None, "unverified"),
    )
    with pytest.raises(PluginError, match=message):
        pair_to_core(spec, PureStaircaseEvent(1.0), make_adj())

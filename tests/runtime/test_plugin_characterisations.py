"""Plugin mechanisms characterised by a Renyi-DP curve, and dominating pairs declared tight."""

from __future__ import annotations

import json
import math
import types
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.rdp import RDPAccountant, tabulated_rdp
from dpledger.accountant.rdp_orders import default_orders
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, PluginError, UnsupportedEventError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    TabulatedProfileEvent,
    TabulatedRDPEvent,
    event_from_dict,
)
from dpledger.core.hookspecs import hookimpl
from dpledger.core.lifting import lift_event
from dpledger.core.specs import MechanismSpec, Provenance
from dpledger.core.validation import positive_finite
from dpledger.report.build import report_pipeline_file
from dpledger.runtime import testing as _testing
from dpledger.runtime.lowering import pair_to_core, rdp_to_core
from dpledger.runtime.plugin_manager import PluginHost
from dpledger.runtime.testing import MechanismSpecContract

dpledger_pm = _testing.dpledger_pm

ADD_REMOVE = Adjacency()
REPLACE_ONE = Adjacency(relation="replace_one")


@attrs.frozen
class RenyiGaussianEvent(Event):
    """Gaussian noise of std ``sigma`` on a query of L2 sensitivity 1 (add/remove)."""

    kind: ClassVar[str] = "test_renyi_gaussian"
    sigma: float = attrs.field(validator=positive_finite)


def _gaussian_rdp(event: Event, adjacency: Adjacency, alpha: float) -> float:
    """alpha Delta^2 / (2 sigma^2), Delta = 1 (add/remove) or 2 (replace-one) (Mironov 2017)."""
    assert isinstance(event, RenyiGaussianEvent)
    sensitivity = 2.0 if adjacency.relation == "replace_one" else 1.0
    return alpha * sensitivity**2 / (2 * event.sigma**2)


RENYI_GAUSSIAN = MechanismSpec(
    name="renyi_gaussian",
    event_class=RenyiGaussianEvent,
    description="Gaussian mechanism known only by its RDP curve",
    proof="Mironov 2017, Proposition 7",
    rdp_curve=_gaussian_rdp,
)
PLUGIN = Provenance("renyi", None, None, "unverified")


def _lowered(sigma: float, adjacency: Adjacency = ADD_REMOVE) -> Event:
    return rdp_to_core(
        attrs.evolve(RENYI_GAUSSIAN, provenance=PLUGIN), RenyiGaussianEvent(sigma), adjacency
    )


@pytest.mark.parametrize("count", [1, 10, 1000])
def test_an_rdp_only_gaussian_composes_exactly_like_the_builtin_gaussian(count: int) -> None:
    # sigma = 2: alpha / 8 is exact, so the curves agree bit for bit at every order
    plugin = RDPAccountant().compose(SelfComposedEvent(_lowered(2.0), count))
    builtin = RDPAccountant().compose(SelfComposedEvent(GaussianEvent(2.0), count))
    np.testing.assert_array_equal(plugin.rdp(), builtin.rdp())
    assert plugin.get_epsilon(1e-5).epsilon == builtin.get_epsilon(1e-5).epsilon
    assert plugin.get_delta(1.0).delta == builtin.get_delta(1.0).delta


def test_an_rdp_only_gaussian_under_replace_one_and_an_inexact_sigma() -> None:
    for adjacency in (ADD_REMOVE, REPLACE_ONE):
        plugin = RDPAccountant(adjacency).compose(SelfComposedEvent(_lowered(0.7, adjacency), 50))
        builtin = RDPAccountant(adjacency).compose(SelfComposedEvent(GaussianEvent(0.7), 50))
        got, want = plugin.get_epsilon(1e-6).epsilon, builtin.get_epsilon(1e-6).epsilon
        assert got == pytest.approx(want, rel=1e-12)
        assert got > 10.0  # a real bound, not a degenerate one


def test_the_curve_is_read_at_the_accountant_orders_and_rounded_up() -> None:
    table = _lowered(0.7)
    assert isinstance(table, TabulatedRDPEvent)
    assert table.orders == tuple(default_orders().tolist()) and table.relation == "add_remove"
    exact = [a / (2 * 0.7**2) for a in table.orders]
    assert all(e < v <= e * (1 + 1e-14) for e, v in zip(exact, table.rdp, strict=True))
    assert event_from_dict(table.to_dict()) == table


def test_other_orders_read_the_next_tabulated_order_above() -> None:
    table = TabulatedRDPEvent([2.0, 4.0], [1.0, 3.0])
    orders = [1.5, 2.0, 3.0, 4.0, 8.0]
    read = tabulated_rdp(np.array(orders), table)
    np.testing.assert_array_equal(read, [1.0, 1.0, 3.0, 3.0, math.inf])
    acc = RDPAccountant(orders=orders).compose(table)
    assert acc.rdp()[2] == pytest.approx(3.0, rel=1e-15) and acc.rdp()[4] == math.inf


def test_only_the_rdp_accountant_composes_a_curve() -> None:
    event = SelfComposedEvent(_lowered(2.0), 10)
    for backend in (ClosedFormAccountant, PLDAccountant):
        with pytest.raises(UnsupportedEventError):
            backend().compose(event)
    selection = account(event, delta=1e-5)
    want = RDPAccountant().compose(SelfComposedEvent(GaussianEvent(2.0), 10)).get_epsilon(1e-5)
    assert selection.method == "rdp" and selection.bound.epsilon == want.epsilon
    assert selection.bound.epsilon_lower == 0.0


def test_a_curve_holds_only_under_its_relation() -> None:
    with pytest.raises(UnsupportedEventError, match="tabulated under add_remove"):
        RDPAccountant(REPLACE_ONE).compose(_lowered(2.0))


def test_the_host_lowers_an_rdp_only_mechanism(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    module = types.ModuleType("renyi")
    module.dpledger_register_mechanisms = hookimpl(  # type: ignore[attr-defined]
        lambda register: register(RENYI_GAUSSIAN)
    )
    host = PluginHost(dpledger_pm)
    host.register(module, name="renyi")
    lowered = host.lower(ComposedEvent([RenyiGaussianEvent(2.0), GaussianEvent(3.0)]))
    assert isinstance(lowered, ComposedEvent)
    assert isinstance(lowered.events[0], TabulatedRDPEvent) and lowered.events[1] == GaussianEvent(
        3.0
    )
    assert lowered.events[0].name == "renyi_gaussian"
    assert RENYI_GAUSSIAN.to_dict()["characterisations"] == ["rdp_curve"]


def _careless(curve: Any) -> MechanismSpec:
    return attrs.evolve(
        RENYI_GAUSSIAN, rdp_curve=lambda e, a, alpha: curve(alpha), provenance=PLUGIN
    )


@pytest.mark.parametrize(
    ("curve", "message"),
    [
        (lambda alpha: 1.0 / alpha, "decreases from"),
        (lambda alpha: math.nan, "nan at order 1.01 is not a non-negative"),
        (lambda alpha: -0.5, "-0.5 at order 1.01 is not a non-negative"),
        (lambda alpha: "0.5", "returned '0.5', not a number"),
        (lambda alpha: True, "returned True, not a number"),
        (lambda alpha: None, "returned None, not a number"),
        (lambda alpha: np.array([alpha, alpha]), "not a number"),
        (lambda alpha: 1 / 0, "raised ZeroDivisionError"),
        (lambda alpha: math.nan if alpha > 100 else alpha, "nan at order 128"),
    ],
)
def test_a_careless_curve_is_a_plugin_error_naming_the_mechanism(curve: Any, message: str) -> None:
    with pytest.raises(PluginError, match="mechanism 'renyi_gaussian' \\(plugin renyi\\)") as info:
        rdp_to_core(_careless(curve), RenyiGaussianEvent(1.0), ADD_REMOVE)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("orders", "values", "field"),
    [
        ([2.0, 3.0], [0.2, 0.1], "rdp"),
        ([2.0, 3.0], [math.nan, 0.1], "rdp"),
        ([2.0, 3.0], [-1.0, 0.1], "rdp"),
        ([2.0, 3.0], ["0.1", 0.2], "rdp"),
        ([1.0, 3.0], [0.1, 0.2], "orders"),
        ([3.0, 2.0], [0.1, 0.2], "orders"),
        ([2.0, 3.0], [0.1], "rdp"),
    ],
)
def test_an_impossible_rdp_table_is_refused(orders: Any, values: Any, field: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        TabulatedRDPEvent(orders, values)
    assert info.value.field == field


class TestRenyiGaussianContract(MechanismSpecContract):
    spec = RENYI_GAUSSIAN
    example_events = (RenyiGaussianEvent(0.5), RenyiGaussianEvent(4.0))
    bad_event_kwargs = ({"sigma": -1.0}, {"sigma": math.inf})


def test_the_contract_catches_a_decreasing_curve() -> None:
    class Careless(TestRenyiGaussianContract):
        spec = attrs.evolve(RENYI_GAUSSIAN, rdp_curve=lambda e, a, alpha: 1.0 / alpha)

    with pytest.raises(PluginError, match="decreases"):
        Careless().test_rdp_curve_is_a_valid_curve()


# -- dominating pairs declared tight ----------------------------------------------------------


@attrs.frozen
class CoinEvent(Event):
    """Binary randomized response at ``epsilon`` (add/remove), as a plugin's own event."""

    kind: ClassVar[str] = "test_tight_coin"
    epsilon: float = attrs.field(validator=positive_finite)


def _coin_pair(event: Event, adjacency: Adjacency) -> tuple[list[float], list[float], float]:
    assert isinstance(event, CoinEvent)
    e0 = event.epsilon * (2.0 if adjacency.relation == "replace_one" else 1.0)
    top = math.exp(e0) / (1.0 + math.exp(e0))
    return [e0, -e0], [top, 1.0 - top], 0.0


COIN = MechanismSpec(
    name="coin",
    event_class=CoinEvent,
    description="binary randomized response",
    proof="Kairouz, Oh & Viswanath 2015, Theorem 3.5 (the pair of randomized response)",
    dominating_pair=_coin_pair,
    pair_is_tight=True,
    provenance=Provenance("coins", None, None, "unverified"),
)


def _coin(count: int, *, tight: bool = True, e0: float = 0.5) -> Event:
    spec = attrs.evolve(COIN, pair_is_tight=tight)
    return SelfComposedEvent(pair_to_core(spec, CoinEvent(e0), ADD_REMOVE), count)


def _exact(count: int, e0: float = 0.5) -> ClosedFormAccountant:
    """Kairouz-Oh-Viswanath's exact composition of randomized response (closed form)."""
    return ClosedFormAccountant().compose(SelfComposedEvent(RandomizedResponseEvent(e0), count))


@pytest.mark.parametrize("count", [1, 10, 100])
def test_a_pair_declared_tight_brackets_the_exact_value_within_one_percent(count: int) -> None:
    bound = PLDAccountant().compose(_coin(count)).get_epsilon(1e-5)
    exact = _exact(count).get_epsilon(1e-5).epsilon
    assert bound.epsilon_lower <= exact <= bound.epsilon
    assert bound.epsilon_lower >= exact * 0.99 and bound.epsilon <= exact * 1.01
    at_one = PLDAccountant().compose(_coin(count)).get_delta(1.0)
    exact_delta = _exact(count).get_delta(1.0).delta
    assert at_one.delta_lower <= exact_delta <= at_one.delta
    assert at_one.delta_lower >= exact_delta * 0.99 or exact_delta == 0.0


def test_the_bracket_of_the_reported_bound_has_the_lower_bound() -> None:
    selection = account(_coin(10), delta=1e-5)
    exact = _exact(10).get_epsilon(1e-5).epsilon
    assert selection.method == "pld"
    assert exact * 0.99 <= selection.bound.epsilon_lower <= exact <= selection.bound.epsilon


def test_without_the_flag_a_pair_gives_no_lower_bound() -> None:
    bound = PLDAccountant().compose(_coin(10, tight=False)).get_epsilon(1e-5)
    exact = _exact(10).get_epsilon(1e-5).epsilon
    assert bound.epsilon_lower == 0.0 and exact <= bound.epsilon <= exact * 1.01
    assert account(_coin(10, tight=False), delta=1e-5).bound.epsilon_lower == 0.0


@pytest.mark.parametrize("flag", [1, "yes", None, np.bool_(True)])
def test_a_non_boolean_tight_flag_is_refused(flag: Any) -> None:
    with pytest.raises(InvalidParameterError, match="pair_is_tight"):
        attrs.evolve(COIN, pair_is_tight=flag)


def test_a_tight_flag_without_a_pair_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="none is given"):
        attrs.evolve(RENYI_GAUSSIAN, pair_is_tight=True)
    assert COIN.to_dict()["pair_is_tight"] is True


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        (([0.5, -0.5], [0.5, 0.3], 0.0), "sum to 1"),
        (([600.0, 0.0], [0.5, 0.5], 0.0), "losses within"),
    ],
)
def test_a_pair_declared_tight_must_be_a_pair_of_probability_laws(pair: Any, message: str) -> None:
    spec = attrs.evolve(COIN, dominating_pair=lambda event, adjacency: pair)
    with pytest.raises(PluginError, match=f"'coin' \\(plugin coins, tier unverified\\).*{message}"):
        pair_to_core(spec, CoinEvent(0.5), ADD_REMOVE)


def test_a_claimed_pair_must_lie_under_its_table() -> None:
    with pytest.raises(InvalidParameterError, match="lies above the table"):
        TabulatedProfileEvent(
            [0.0, 0.5],
            [0.1, 0.0],  # the coin's curve is 0.2449 at 0
            tight_losses=[0.5, -0.5],
            tight_masses=[0.6224593312018546, 0.3775406687981454],
            tight_claim="a wrong claim",
        )
    with pytest.raises(InvalidParameterError, match="need tight_losses"):
        TabulatedProfileEvent([0.0], [0.5], tight_claim="a claim without a pair")


def test_the_claim_travels_with_the_table_but_not_through_group_privacy() -> None:
    table = pair_to_core(COIN, CoinEvent(0.5), ADD_REMOVE)
    assert isinstance(table, TabulatedProfileEvent) and table.tight_losses == (0.5, -0.5)
    assert "'coin' (plugin coins, tier unverified)" in table.tight_claim
    assert "Kairouz, Oh & Viswanath" in table.tight_claim
    assert event_from_dict(table.to_dict()) == table
    plain = pair_to_core(attrs.evolve(COIN, pair_is_tight=False), CoinEvent(0.5), ADD_REMOVE)
    assert not any(k.startswith("tight") for k in plain.to_dict())
    lifted, _ = lift_event(table, 2)
    assert isinstance(lifted, TabulatedProfileEvent) and lifted.tight_losses is None


def test_the_report_names_the_claim_the_lower_bound_rests_on(tmp_path: Path) -> None:
    table = pair_to_core(COIN, CoinEvent(0.5), ADD_REMOVE)
    pipeline = tmp_path / "p.json"
    pipeline.write_text(
        json.dumps(
            {
                "delta": 1e-5,
                "sources": [{"name": "d", "adjacency": {"relation": "add_remove"}}],
                "releases": [{"id": "coin", "input": "d", "event": table.to_dict(), "count": 10}],
            }
        )
    )
    built = report_pipeline_file(pipeline, delta=1e-5)
    exact = _exact(10).get_epsilon(1e-5).epsilon
    assert exact * 0.99 <= built.report.bound["epsilon_lower"] <= exact
    claims = [a for a in built.report.assumptions if "rests on a claim" in a]
    assert claims == [
        "release 'coin': the certified lower bound rests on a claim, not on a proof record: "
        + table.tight_claim
    ]


class TestCoinContract(MechanismSpecContract):
    spec = COIN
    example_events = (CoinEvent(0.5), CoinEvent(3.0))
    bad_event_kwargs = ({"epsilon": -1.0},)


def test_the_contract_catches_a_tight_pair_that_is_no_pair_of_laws() -> None:
    class Careless(TestCoinContract):
        spec = attrs.evolve(COIN, dominating_pair=lambda e, a: ([0.5, -0.5], [0.5, 0.3], 0.0))

    with pytest.raises(PluginError, match="sum to 1"):
        Careless().test_tight_pair_is_a_pair_of_probability_laws()

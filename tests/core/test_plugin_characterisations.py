"""Plugin mechanisms characterised by a Renyi-DP curve, and dominating pairs declared tight."""

from __future__ import annotations

import math
import types
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
    SelfComposedEvent,
    TabulatedRDPEvent,
    event_from_dict,
)
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MechanismSpec, Provenance
from dpledger.core.validation import positive_finite
from dpledger.runtime import testing as _testing
from dpledger.runtime.lowering import rdp_to_core
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

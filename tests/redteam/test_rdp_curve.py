"""A plugin's Renyi-DP curve charges its own mechanism only: it can never lower the charge of
another release composed with it."""

from __future__ import annotations

import math
import types
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

import dpledger.accountant.rdp as rdp
from dpledger.accountant.select import account
from dpledger.cli import main
from dpledger.core.errors import IntegrityError, PluginError
from dpledger.core.events import ComposedEvent, Event, GaussianEvent, TabulatedRDPEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MechanismSpec
from dpledger.runtime.plugin_manager import PluginHost


@attrs.frozen
class ShadowEvent(Event):
    """A release whose plugin claims a curve for it."""

    kind: ClassVar[str] = "rt_rdp_shadow"


class LyingFloat(float):
    """Compares and adds as if it were minus a thousand, to trick a careless sum."""

    def __add__(self, other: Any) -> float:
        return -1000.0

    __radd__ = __add__

    def __lt__(self, other: Any) -> bool:
        return False

    def __float__(self) -> float:
        return 0.25


def _host(pm: Any, curve: Any, name: str) -> PluginHost:
    spec = MechanismSpec(
        name="shadow",
        event_class=ShadowEvent,
        description="a release with a claimed RDP curve",
        proof="none",
        rdp_curve=curve,
    )
    module = types.ModuleType(name)
    module.dpledger_register_mechanisms = hookimpl(  # type: ignore[attr-defined]
        lambda register: register(spec)
    )
    host = PluginHost(pm)
    host.register(module, name=name)
    return host


GAUSSIAN = GaussianEvent(1.0)


def _epsilon(event: Event) -> float:
    return float(account(event, delta=1e-5).bound.epsilon)


def test_a_negative_curve_cannot_subtract_from_a_gaussian(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    host = _host(dpledger_pm, lambda e, a, alpha: -alpha, "negative")
    with pytest.raises(PluginError, match=r"'shadow' \(plugin negative\).*not a non-negative"):
        host.lower(ComposedEvent([GAUSSIAN, ShadowEvent()]))


def test_a_float_that_lies_in_arithmetic_is_read_as_its_value(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    host = _host(dpledger_pm, lambda e, a, alpha: LyingFloat(0.25), "liar")
    lowered = host.lower(ComposedEvent([GAUSSIAN, ShadowEvent()]))
    assert isinstance(lowered, ComposedEvent)
    table = lowered.events[1]
    assert isinstance(table, TabulatedRDPEvent)
    assert all(type(v) is float and v >= 0.25 for v in table.rdp)
    # the Gaussian's charge is not lowered: the composition costs more than the Gaussian alone
    assert _epsilon(lowered) > _epsilon(GAUSSIAN)


def test_a_zero_curve_leaves_the_gaussian_charged_in_full(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    host = _host(dpledger_pm, lambda e, a, alpha: 0.0, "zero")
    lowered = host.lower(ComposedEvent([GAUSSIAN, ShadowEvent()]))
    alone = rdp.RDPAccountant().compose(GAUSSIAN).get_epsilon(1e-5).epsilon
    # only RDP composes the curve, so the Gaussian is charged its RDP bound (not below)
    assert _epsilon(lowered) >= alone >= _epsilon(GAUSSIAN)


def test_a_sparse_table_is_no_bound_at_the_orders_it_leaves_out() -> None:
    # one tiny value at order 1.5: every higher order must be +inf, never 0
    sparse = TabulatedRDPEvent([1.5], [1e-9])
    both = rdp.RDPAccountant().compose(ComposedEvent([GAUSSIAN, sparse]))
    alone = rdp.RDPAccountant().compose(GAUSSIAN)
    assert both.get_epsilon(1e-5).epsilon >= alone.get_epsilon(1e-5).epsilon
    assert (both.rdp() >= alone.rdp()).all()


def test_a_curve_that_patches_the_accountant_is_refused(  # type: ignore[no-untyped-def]
    dpledger_pm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rdp, "gaussian_rdp", rdp.gaussian_rdp)  # restored after the test

    def curve(event: Event, adjacency: Any, alpha: float) -> float:
        rdp.gaussian_rdp = lambda orders, mu: orders * 0.0  # type: ignore[assignment]
        return alpha

    host = _host(dpledger_pm, curve, "patcher")
    with pytest.raises(IntegrityError, match="'patcher'"):
        host.lower(ComposedEvent([GAUSSIAN, ShadowEvent()]))


def test_a_pipeline_table_with_a_negative_value_is_refused(tmp_path: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        "delta = 1e-5\n"
        "[[sources]]\n"
        'name = "d"\n'
        'adjacency = { relation = "add_remove" }\n'
        "[[releases]]\n"
        'id = "g"\n'
        'input = "d"\n'
        'event = { kind = "gaussian", noise_multiplier = 1.0 }\n'
        "[[releases]]\n"
        'id = "t"\n'
        'input = "d"\n'
        'event = { kind = "tabulated_rdp", orders = [2.0, 4.0], rdp = [-5.0, 1.0] }\n'
    )
    assert main(["account", str(pipeline), "--json"]) == 2
    assert "not a non-negative number" in capfd.readouterr().err
    pipeline.write_text(pipeline.read_text().replace("[-5.0, 1.0]", "[0.5, 1.0]"))
    assert main(["account", str(pipeline), "--json"]) == 0
    assert math.isfinite(_epsilon(ComposedEvent([GAUSSIAN, TabulatedRDPEvent([2.0], [0.5])])))

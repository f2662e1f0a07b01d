from __future__ import annotations

import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent
from dpledger.plugins.path import baselines_plugin
from dpledger.runtime.testing import forbid_imports


def test_registers_direct_and_aim() -> None:
    got: list[str] = []
    baselines_plugin.dpledger_register_methods(lambda spec: got.append(spec.name))
    assert got == ["direct", "aim"]


def test_declare_without_jax_or_mbi() -> None:
    d = baselines_plugin.DIRECT_SPEC.make_params({"epsilon": 2.0, "delta": 1e-6})
    a = baselines_plugin.AIM_SPEC.make_params(
        {"epsilon": 2.0, "delta": 1e-6, "noise_multiplier": 3.0, "rounds": 8}
    )
    with forbid_imports("jax", "mbi", "torch"):
        assert isinstance(baselines_plugin.DIRECT_SPEC.declare(d, None), GaussianEvent)
        ev = baselines_plugin.AIM_SPEC.declare(a, None)
    assert ev.describe().count("exponential_mechanism") == 2  # two annealing levels


@pytest.mark.parametrize(
    "bad", [{"epsilon": 0.0}, {"delta": 1.0}, {"variant": "indep"}, {"length": 0}]
)
def test_bad_params(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidParameterError):
        baselines_plugin.DIRECT_SPEC.make_params({"epsilon": 1.0, "delta": 1e-6, **bad})


def test_run_refuses_non_tables() -> None:
    from dpledger.runtime.runner import run_verified

    p = baselines_plugin.DIRECT_SPEC.make_params({"epsilon": 1.0, "delta": 1e-6})
    with pytest.raises(InvalidParameterError, match="UserTables"):
        run_verified(baselines_plugin.DIRECT_SPEC, p, [[1.0, 2.0]], seed=0)

"""The template's tests: dpledger's contract, plus what is specific to this method.

The plugin's own code imports from ``dpledger.plugin`` only; its tests also use dpledger's
testing API, ``dpledger.runtime.testing`` (fixtures and contract classes).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from dpledger_plugin_template import plugin

from dpledger.plugin import run_verified
from dpledger.runtime import testing as _testing
from dpledger.runtime.testing import MethodPluginContract

# fixtures (also provided by the pytest11 plugin once dpledger is installed)
dpledger_pm = _testing.dpledger_pm
dpledger_register = _testing.dpledger_register


class TestClippedSum(MethodPluginContract):
    spec = plugin.SPEC
    valid_params: ClassVar[dict[str, Any]] = {"clip": 1.0, "noise_multiplier": 1.2}
    bad_params: ClassVar[list[dict[str, Any]]] = [
        {"clip": 0.0},
        {"noise_multiplier": -1.0},
        {"clip": "big"},
    ]

    def make_data(self, rng: np.random.Generator) -> Any:
        return rng.normal(size=(25, 3))


def test_registered_through_the_hook(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    with dpledger_register(plugin, name="template") as host:
        assert host.method("clipped_sum").provenance.plugin == "template"


def test_rows_are_clipped_before_summing() -> None:
    params = plugin.SPEC.make_params({"clip": 1.0, "noise_multiplier": 1e-9})
    data = np.array([[3.0, 4.0], [0.0, 0.5]])  # first row clipped to (0.6, 0.8)
    result = run_verified(plugin.SPEC, params, data, seed=0)
    np.testing.assert_allclose(result.outputs["sum"], [0.6, 1.3], atol=1e-6)

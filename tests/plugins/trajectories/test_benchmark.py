"""The benchmark's loop implementation agrees with the vectorised one (tiny size)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np

SCRIPT = Path(__file__).parents[3] / "benchmarks" / "trajectories.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trajectories_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_loop_and_vectorised_gradients_agree(capsys) -> None:  # type: ignore[no-untyped-def]
    b = _bench()
    pb = b.make_problem(6, 3, 40, 10.0, 0, "cpu")
    plans = b.plans_for(pb)
    gv = b.vectorised_grad(pb, plans).numpy()
    gl = b.loop_grad(pb, plans)
    assert np.abs(gv).max() > 1.0
    np.testing.assert_allclose(gv, gl, rtol=1e-10, atol=1e-10)
    assert b.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "loop / vectorised" in out and "one private iteration" in out

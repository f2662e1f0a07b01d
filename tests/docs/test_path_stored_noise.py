"""The PATH page's stored runs used the noise that today's code calibrates.

Every private run of the Table 2 files records its noise multipliers. They must be what the
method's calibration gives today for the file's settings, or the page's numbers would not
regenerate (``experiments/path/regenerate.py``). The calibrations sit on a grid of three
significant digits, so a small change of the accountant's bounds leaves them in place; a change
that moves one fails here, and the runs it names are re-run.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dpledger.core.declaration import Declaration
from dpledger.core.events import ComposedEvent, Event, GaussianEvent, flatten

ROOT = Path(__file__).parents[2]
FOLDER = ROOT / "experiments" / "path"
#: the stored rows whose runs add calibrated noise, and the ``info`` keys that record it
NOISE_KEYS = {
    "direct_markov": ("noise_multiplier",),
    "direct_across": ("noise_multiplier",),
    "direct_markov_nonprivate": ("noise_multiplier",),
    "direct_across_nonprivate": ("noise_multiplier",),
    "aim": ("sigma0",),
    "aim_nonprivate": ("sigma0",),
    "path": ("noise_multiplier", "selection_noise_multiplier"),
}


def _cells() -> list[tuple[str, str, float]]:
    out = []
    for path in sorted(FOLDER.glob("table2_*.json")):
        for row in json.loads(path.read_text())["rows"]:
            if row["method"] in NOISE_KEYS:
                out.append((path.name, str(row["method"]), float(row["epsilon"])))
    return out


@functools.cache
def _experiments() -> tuple[ModuleType, ModuleType]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from experiments.path import regenerate, table2

    return table2, regenerate


def _calibrated(name: str, method: str, epsilon: float) -> tuple[float, ...]:
    """The noise multipliers today's code gives the stored run's settings."""
    table2, regenerate = _experiments()
    stored = json.loads((FOLDER / name).read_text())
    eps = [epsilon] if math.isfinite(epsilon) else []
    args = regenerate._table2_args(stored["args"], [method], eps)
    args.seed = 0  # the seed does not enter a calibration: runs that differ by it share one
    spec, params, adjacency = table2.method_params(
        method, epsilon, stored["delta"], stored["n_train"], stored["n_test"], Path("PRE"), args
    )
    return _declared_noise(method, spec, params, adjacency)


@functools.cache
def _declared_noise(method: str, spec: Any, params: Any, adjacency: Any) -> tuple[float, ...]:
    declared = spec.declare(params, adjacency)
    event: Event = declared.event if isinstance(declared, Declaration) else declared
    if method.startswith("aim"):  # sigma_0: the noise of the first level's measurements
        return (_aim_sigma0(event),)
    if method == "path":  # training (inside sampling and composition), then selection
        assert isinstance(event, ComposedEvent)
        train, select = event.events
        (leaf, _), *_ = flatten(train)
        return _gaussian_noise(leaf), _gaussian_noise(select)
    return (_gaussian_noise(event),)


def _aim_sigma0(event: Event) -> float:
    # the declaration is [Gaussian(init), SelfComposed([Gaussian(sigma_0), EM], n), ...]
    assert isinstance(event, ComposedEvent)
    return _gaussian_noise(event.events[1].event.events[0])  # type: ignore[attr-defined]


def _gaussian_noise(event: Any) -> float:
    while not isinstance(event, GaussianEvent):
        event = event.event
    return float(event.noise_multiplier)


@pytest.mark.parametrize(("name", "method", "epsilon"), _cells())
def test_stored_run_used_todays_calibrated_noise(name: str, method: str, epsilon: float) -> None:
    stored = json.loads((FOLDER / name).read_text())
    row = next(
        r for r in stored["rows"] if r["method"] == method and float(r["epsilon"]) == epsilon
    )
    recorded = tuple(float(row["info"][k]) for k in NOISE_KEYS[method])
    assert recorded == _calibrated(name, method, epsilon)


def _sweep_cells() -> list[tuple[str, int]]:
    out = []
    for path in sorted(FOLDER.glob("sweep_*.json")):
        for row in json.loads(path.read_text())["rows"]:
            if row["method"] == "aim":
                out.append((path.name, int(row["seed"])))
    return out


@functools.cache
def _sweep_aim_certified(args_json: str, delta: float, n_train: int, n_test: int) -> float:
    """The certified epsilon of AIM as today's code calibrates it for a sweep's settings."""
    import argparse

    from dpledger.accountant.select import account

    table2, _ = _experiments()
    from experiments.path import sweep

    stored = argparse.Namespace(**json.loads(args_json))
    args = sweep.table2_args(stored, stored.sizes[0], stored.pretrain_steps[0], 0)
    spec, params, adjacency = table2.method_params(
        "aim", stored.epsilon, delta, n_train, n_test, None, args
    )
    declared = spec.declare(params, adjacency)
    event = declared.event if isinstance(declared, Declaration) else declared
    return float(account(event, adjacency, delta=delta).bound.epsilon)


@pytest.mark.parametrize(("name", "seed"), _sweep_cells())
def test_stored_sweep_aim_run_used_todays_calibrated_noise(name: str, seed: int) -> None:
    """The sweep's AIM rows record no sigma_0; their certified epsilon, a function of it, must
    be what today's calibration certifies (80/20 split of the sweep's users)."""
    stored = json.loads((FOLDER / name).read_text())
    row = next(r for r in stored["rows"] if r["method"] == "aim" and r["seed"] == seed)
    n_users = int(stored["args"]["n_users"])
    n_test = n_users // 5
    assert float(row["delta"]) == 1.0 / (n_users - n_test) ** 2
    want = _sweep_aim_certified(
        json.dumps(stored["args"], sort_keys=True), row["delta"], n_users - n_test, n_test
    )
    assert float(row["epsilon_certified"]) == pytest.approx(want, rel=1e-9)

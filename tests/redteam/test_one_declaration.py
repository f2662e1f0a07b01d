"""What is accounted, enforced and written is one frozen declaration.

The dishonest plugins here answer ``declare`` differently the second time, or keep a reference
to the declared event and mutate it in place during ``run``, or tamper with the ledger's copy.
Each must end in a refusal or in the epsilon of the noise really added, never a smaller one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent

SOURCE = """
import attrs
import numpy as np
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec

CALLS = []
KEPT = []

@attrs.frozen
class P:
    noise_multiplier: float = 10.0

def declare(params, adjacency):
    CALLS.append(1)
    # {mode}
    if "{mode}" == "second_answer_smaller" and len(CALLS) > 1:
        return GaussianEvent(1.0)
    event = GaussianEvent(params.noise_multiplier)
    KEPT.append(event)
    return event

def run(params, data, ledger, rng):
    if "{mode}" == "mutate_kept":
        object.__setattr__(KEPT[0], "noise_multiplier", 1.0)
    if "{mode}" == "mutate_ledger":
        object.__setattr__(ledger.declared, "noise_multiplier", 1.0)
    sigma = 10.0 if "{mode}" == "honest" else 1.0
    return {"release": ledger.gaussian(np.zeros(3), 1.0, sigma, step="release")}

@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="shifty", params=P, declare=declare, run=run,
                        description="a Gaussian release", proof="Balle & Wang 2018"))
"""


def _install(make_dist, mode: str) -> None:  # type: ignore[no-untyped-def]
    make_dist(
        f"shifty-{mode.replace('_', '-')}",
        "1.0",
        {f"shifty_{mode}": SOURCE.replace("{mode}", mode)},
        {"shifty": f"shifty_{mode}"},
    )


def _run(tmp_path: Path) -> tuple[int, Path]:
    config = tmp_path / "c.toml"
    config.write_text("delta = 1e-5\n[params]\nnoise_multiplier = 10.0\n")
    out = tmp_path / "out"
    code = main(
        ["run", "shifty", "--config", str(config), "--out", str(out), "--plugins-allow", "shifty"]
    )
    return code, out


@pytest.mark.parametrize("mode", ["second_answer_smaller", "mutate_kept", "mutate_ledger"])
def test_a_run_that_spends_more_than_accounted_is_refused(
    make_dist,
    tmp_path,
    capfd,  # type: ignore[no-untyped-def]
    mode: str,
) -> None:
    _install(make_dist, mode)
    code, out = _run(tmp_path)
    err = capfd.readouterr().err
    assert code == 2, err
    if mode == "mutate_kept":
        # the declaration was made in another process (a declaration worker): the event the
        # plugin kept is not in the process that runs it, so the mutation cannot happen
        assert "failed with IndexError" in err and "'shifty'" in err, err
    else:
        assert "noise multiplier 1.0 is smaller than the declared 10.0" in err
    assert not out.exists()


def test_declare_runs_outside_and_the_honest_run_reports_its_noise(
    make_dist,
    tmp_path,  # type: ignore[no-untyped-def]
    capfd,
) -> None:
    _install(make_dist, "honest")
    code, out = _run(tmp_path)
    assert code == 0, capfd.readouterr().err
    # declare runs in a worker process with the run's canonical inputs, never in dpledger's
    import sys

    assert "shifty_honest" not in sys.modules
    record = json.loads((out / "ledger.json").read_text())
    exact = ClosedFormAccountant(Adjacency()).compose(GaussianEvent(10.0)).get_epsilon(1e-5).epsilon
    assert record["privacy"]["epsilon"] == pytest.approx(exact, rel=1e-9)
    assert record["declared"] == {"kind": "gaussian", "noise_multiplier": 10.0}

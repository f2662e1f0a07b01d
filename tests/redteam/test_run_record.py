"""The public run record holds data-independent facts only.

An honest DP-SGD run on a one-row and a two-row dataset (neighbours under add/remove) with the
same seed must write byte-identical ``ledger.json`` files: the realised Poisson batch sizes and
row counts (which alone separated the two datasets at epsilon >= 2.04 against a certified 0.28)
and the seed (which undoes the noise) go to the private diagnostics file only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpledger.cli import main
from dpledger.core.events import (
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    event_from_dict,
    flatten,
)
from dpledger.core.specs import MethodSpec, ProofRef
from dpledger.plugins.primitives import dp_sgd
from dpledger.runtime.ledger import PrivacyLedger
from dpledger.runtime.runner import run_verified

CONFIG = """data = "data.npz"
delta = 1e-5
[params]
steps = 40
sampling_probability = 0.5
noise_multiplier = 1.0
clip_norm = 1.0
expected_batch_size = 1.0
"""


DPSGD = {
    "steps": 40,
    "sampling_probability": 0.5,
    "noise_multiplier": 1.0,
    "clip_norm": 1.0,
    "expected_batch_size": 1.0,
}
DATA = {"x": np.array([[1.0, 0.0], [0.0, 1.0]]), "y": np.array([1.0, 0.0])}


def _run(tmp_path: Path, name: str, rows: int) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    x = np.array([[1.0, 0.0], [0.0, 1.0]])[:rows]
    y = np.array([1.0, 0.0])[:rows]
    np.savez(folder / "data.npz", x=x, y=y)
    (folder / "c.toml").write_text(CONFIG)
    out = folder / "out"
    assert (
        main(
            [
                "run",
                "dp_sgd_logistic",
                "--config",
                str(folder / "c.toml"),
                "--out",
                str(out),
                "--seed",
                "11",
            ]
        )
        == 0
    )
    return out


def test_neighbouring_runs_write_identical_public_records(tmp_path, capfd) -> None:  # type: ignore[no-untyped-def]
    one, two = _run(tmp_path, "one", 1), _run(tmp_path, "two", 2)
    capfd.readouterr()
    assert (one / "ledger.json").read_bytes() == (two / "ledger.json").read_bytes()
    record = json.loads((one / "ledger.json").read_text())
    assert "seed" not in record
    assert record["steps"] and not any({"size", "rows"} & set(s) for s in record["steps"])
    # the private diagnostics do differ: that is where the realised sizes live
    assert not list(one.glob("PRIVATE-*")) and not list(two.glob("PRIVATE-*"))
    p1 = json.loads((one.parent / "out.private" / "PRIVATE-diagnostics.json").read_text())
    p2 = json.loads((two.parent / "out.private" / "PRIVATE-diagnostics.json").read_text())
    sizes1 = [s["size"] for s in p1["steps"] if "size" in s]
    sizes2 = [s["size"] for s in p2["steps"] if "size" in s]
    assert len(sizes1) == len(sizes2) == 40
    assert max(sizes1) <= 1 < max(sizes2)
    assert p1["seed"] == 11


#: a method that skips the noise of an empty Poisson batch: before, the public record booked only
#: the non-empty batches, so its executed count alone told a one-row from a many-row dataset
STEPS, RATE = 40, 0.5


def _skip_empty(params: Any, data: Any, ledger: PrivacyLedger, rng: Any) -> dict[str, Any]:
    rows = np.asarray(data, dtype=float).reshape(-1, 1)
    total = np.zeros(1)
    for t in range(STEPS):
        with ledger.poisson_sample(rows.shape[0], RATE, step=f"sample[{t}]") as batch:
            if len(batch) == 0:
                continue
            total += ledger.clipped_sum_gaussian(rows[batch.indices], 1.0, 1.0, step=f"sum[{t}]")
    return {"total": total}


@attrs.frozen
class _NoParams:
    pass


SKIPPER = MethodSpec(
    name="skip_empty_batches",
    params=_NoParams,
    declare=lambda p, a: SelfComposedEvent(PoissonSampledEvent(RATE, GaussianEvent(1.0)), STEPS),
    run=_skip_empty,
    description="skips the noise of empty Poisson batches",
    proof=ProofRef("none: a planted method"),
)


def _executed_leaves(executed: dict[str, Any]) -> list[Any]:
    return [leaf for leaf, count in flatten(event_from_dict(executed)) for _ in range(count)]


def test_skipping_empty_batches_does_not_show_in_the_public_record() -> None:
    one = run_verified(SKIPPER, _NoParams(), np.ones(1), seed=3)
    many = run_verified(SKIPPER, _NoParams(), np.ones(30), seed=3)
    # the method did skip: what it booked differs (kept in the private diagnostics)
    booked_one = _executed_leaves(one.ledger.private_dict()["executed"])
    booked_many = _executed_leaves(many.ledger.private_dict()["executed"])
    assert len(booked_one) < len(booked_many) == STEPS
    # the public record states every drawn sample as its declared step, empty or not
    assert one.ledger.to_dict() == many.ledger.to_dict()
    public = one.ledger.to_dict()
    step = PoissonSampledEvent(RATE, GaussianEvent(1.0))
    assert _executed_leaves(public["executed"]) == [step] * STEPS
    assert [s["step"] for s in public["steps"]] == [f"sample[{t}]" for t in range(STEPS)]
    # the noise steps that ran, batch by batch, are private
    noises = [s for s in one.ledger.private_dict()["steps"] if s.get("event")]
    assert len(noises) == len(booked_one) and noises[0]["batch"].startswith("sample 'sample[")


def test_an_honest_poisson_run_publishes_what_it_booked() -> None:
    honest = run_verified(dp_sgd.SPEC, dp_sgd.SPEC.make_params(dict(DPSGD)), DATA, seed=3)
    ledger = honest.ledger
    assert ledger.public_executed_event() == ledger.executed_event()
    assert ledger.public_matches_exactly() and ledger.matches_exactly()

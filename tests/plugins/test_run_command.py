"""``dpledger run``: verified runs write outputs and ledger.json; cheating runs write nothing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dpledger.cli import main

CHEATS = """
import attrs
import numpy as np
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec

@attrs.frozen
class P:
    pass

def _spec(name, declared, run):
    return MethodSpec(name=name, params=P, declare=lambda p, a: declared, run=run,
                      description="cheats", proof="none")

def less_noise(params, data, ledger, rng):
    return {"x": ledger.gaussian(data, 1.0, 1.0, step="noisy_sum")}  # declared 2.0

def more_steps(params, data, ledger, rng):
    out = [ledger.gaussian(data, 1.0, 2.0, step=f"iter[{t}]") for t in range(4)]  # declared 3
    return {"x": np.asarray(out)}

def higher_rate(params, data, ledger, rng):
    with ledger.poisson_sample(len(data), 0.3, step="batch") as batch:  # declared 0.1
        s = ledger.gaussian(data[batch.indices].sum(), 1.0, 2.0, step="batch_noise")
    return {"x": s}

def loose_clip(params, data, ledger, rng):
    rows = ledger.clip_rows_l2(data.reshape(-1, 1), 2.0, step="clip")  # sensitivity 2, claims 1
    return {"x": ledger.gaussian(rows.sum(), 1.0, 2.0, step="clipped_sum")}

G = GaussianEvent(2.0)

@hookimpl
def dpledger_register_methods(register):
    register(_spec("less_noise", G, less_noise))
    register(_spec("more_steps", SelfComposedEvent(G, 3), more_steps))
    register(_spec("higher_rate", PoissonSampledEvent(0.1, G), higher_rate))
    register(_spec("loose_clip", G, loose_clip))
"""


@pytest.fixture
def setup(tmp_path: Path, make_dist):  # type: ignore[no-untyped-def]
    make_dist("cheat-plugin", "0.1", {"cheat_mod": CHEATS}, {"cheat": "cheat_mod"})
    make_dist(
        "prims-under-test",
        "0.1",
        {},
        {
            "laplace": "dpledger.plugins.primitives.laplace",
            "mean": "dpledger.plugins.primitives.bounded_mean",
        },
    )
    np.save(tmp_path / "data.npy", np.arange(1.0, 21.0))
    (tmp_path / "empty.toml").write_text('data = "data.npy"\n')
    return tmp_path


@pytest.mark.parametrize(
    ("method", "step", "reason"),
    [
        ("less_noise", "noisy_sum", "noise multiplier 1.0 is smaller than the declared 2.0"),
        ("more_steps", "iter[3]", "more steps than declared"),
        ("higher_rate", "batch_noise", "sampling rate 0.3 exceeds the declared 0.1"),
        ("loose_clip", "clipped_sum", "below the L2 bound 2.0 implied by the clip at step 'clip'"),
    ],
)
def test_cheating_run_is_stopped_and_writes_nothing(setup, capfd, method, step, reason) -> None:  # type: ignore[no-untyped-def]
    out = setup / "out"
    code = main(
        [
            "run",
            method,
            "--config",
            str(setup / "empty.toml"),
            "--out",
            str(out),
            "--seed",
            "1",
            "--plugins-allow",
            "cheat",
        ]
    )
    err = capfd.readouterr().err
    assert code == 2
    assert f"step {step!r}" in err and reason in err
    assert not out.exists()
    assert sorted(p.name for p in setup.iterdir()) == ["data.npy", "empty.toml", "site"]


def test_verified_run_writes_outputs_and_ledger(setup, capfd) -> None:  # type: ignore[no-untyped-def]
    config = setup / "laplace.toml"
    config.write_text(
        'data = "data.npy"\ndelta = 1e-5\n[params]\nsensitivity = 1.0\nnoise_multiplier = 2.0\n'
    )
    out = setup / "out"
    assert (
        main(
            [
                "run",
                "laplace_mechanism",
                "--config",
                str(config),
                "--out",
                str(out),
                "--seed",
                "7",
                "--plugins-allow",
                "laplace",
            ]
        )
        == 0
    )
    assert "verified" in capfd.readouterr().out
    ledger = json.loads((out / "ledger.json").read_text())
    assert ledger["declared"] == {"kind": "laplace", "noise_multiplier": 2.0}
    assert ledger["executed"] == {
        "kind": "composed",
        "events": [{"kind": "laplace", "noise_multiplier": 2.0}],
    }
    assert ledger["verified"] is True and "seed" not in ledger  # the seed undoes the noise
    # the private diagnostics go beside the published directory, never into it
    assert not list(out.glob("PRIVATE-*"))
    private = json.loads((setup / "out.private" / "PRIVATE-diagnostics.json").read_text())
    assert private["seed"] == 7 and "never publish" in private["warning"].lower()
    assert ledger["provenance"]["distribution"] == "prims-under-test"
    # exact Laplace profile: epsilon(delta) = eps0 + 2 log(1 - delta), eps0 = 1/2
    eps = ledger["privacy"]["epsilon"]
    exact = 0.5 + 2 * math.log1p(-1e-5)
    assert exact - 1e-12 <= eps <= 0.5
    assert ledger["privacy"]["delta"] == 1e-5 and ledger["privacy"]["method"]
    release = np.load(out / "release.npy")
    assert release.shape == (20,)
    # same seed, same release
    out2 = setup / "out2"
    assert (
        main(
            [
                "run",
                "laplace_mechanism",
                "--config",
                str(config),
                "--out",
                str(out2),
                "--seed",
                "7",
                "--plugins-allow",
                "laplace",
            ]
        )
        == 0
    )
    np.testing.assert_array_equal(np.load(out2 / "release.npy"), release)


def test_json_config_and_existing_out_dir_refused(setup, capfd) -> None:  # type: ignore[no-untyped-def]
    np.save(setup / "rows.npy", np.ones((10, 2)))
    config = setup / "mean.json"
    config.write_text(
        json.dumps(
            {"params": {"radius": 1.0, "noise_multiplier": 1.0, "n": 10}, "data": "rows.npy"}
        )
    )
    out = setup / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert (
        main(
            [
                "run",
                "private_mean",
                "--config",
                str(config),
                "--out",
                str(out),
                "--plugins-allow",
                "mean",
            ]
        )
        == 2
    )
    assert "not an empty directory" in capfd.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    (out / "keep.txt").unlink()
    assert (
        main(
            [
                "run",
                "private_mean",
                "--config",
                str(config),
                "--out",
                str(out),
                "--plugins-allow",
                "mean",
                "--seed",
                "3",
            ]
        )
        == 0
    )
    ledger = json.loads((out / "ledger.json").read_text())
    assert [s["step"] for s in ledger["steps"]] == ["mean.sum.clip", "mean.sum"]
    assert np.load(out / "mean.npy").shape == (2,)


def test_unknown_method_and_bad_params(setup, capfd) -> None:  # type: ignore[no-untyped-def]
    out = setup / "out"
    assert (
        main(
            [
                "run",
                "nope",
                "--config",
                str(setup / "empty.toml"),
                "--out",
                str(out),
                "--plugins-allow",
                "laplace",
            ]
        )
        == 2
    )
    assert "no method named 'nope'" in capfd.readouterr().err
    bad = setup / "bad.toml"
    bad.write_text("[params]\nsensitivity = -1.0\nnoise_multiplier = 1.0\n")
    assert (
        main(
            [
                "run",
                "laplace_mechanism",
                "--config",
                str(bad),
                "--out",
                str(out),
                "--plugins-allow",
                "laplace",
            ]
        )
        == 2
    )
    assert "sensitivity" in capfd.readouterr().err
    assert not out.exists()

"""``dpledger run`` refuses bad config values in one line naming the field and the fix, and a
method that fails in ``run()`` is named with its plugin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.cli import main

PARAMS = "[params]\nsensitivity = 1.0\nnoise_multiplier = 2.0\n"

#: a third-party method that assigns to its frozen parameters in run()
FROZEN = """
import attrs
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


@attrs.frozen
class P:
    noise_multiplier: float = 2.0


def run(params, data, ledger, rng):
    params.noise_multiplier = 0.1
    return {}


@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="rt_frozen", params=P, run=run, description="d", proof="p",
                        declare=lambda p, a: GaussianEvent(p.noise_multiplier)))
"""


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ("data = 3\n" + PARAMS, "data: must be the path of a data file, got 3"),
        ('data = "d.npy"\ndelta = "x"\n' + PARAMS, "delta: must be a number in (0, 1), got 'x'"),
        ('data = "d.npy"\ndelta = true\n' + PARAMS, "delta: must be a number in (0, 1)"),
        ('data = "d.npy"\ndelta = 1\n' + PARAMS, "delta: must be a number in (0, 1), got 1"),
    ],
)
def test_bad_config_values_are_one_line(
    tmp_path: Path, capfd: Any, config: str, field: str
) -> None:
    np.save(tmp_path / "d.npy", np.ones(3))
    (tmp_path / "c.toml").write_text(config)
    out = tmp_path / "out"
    args = ["run", "gaussian_mechanism", "--config", str(tmp_path / "c.toml"), "--out", str(out)]
    assert main(args) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and field in err and "Fix:" in err, err
    assert not out.exists()


def test_a_method_that_assigns_to_frozen_params_is_named(
    make_dist: Any, tmp_path: Path, capfd: Any
) -> None:
    make_dist("frozen-plugin", "1.0", {"rt_frozen": FROZEN}, {"frozen": "rt_frozen"})
    np.save(tmp_path / "d.npy", np.ones(3))
    (tmp_path / "c.toml").write_text('data = "d.npy"\n')
    out = tmp_path / "out"
    args = ["run", "rt_frozen", "--config", str(tmp_path / "c.toml"), "--out", str(out)]
    assert main(args) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1, err
    assert "rt_frozen" in err and "frozen" in err and "internal error" not in err, err
    assert not out.exists()

"""`dpledger account` and `dpledger calibrate`: output, JSON keys, and one-line errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dpledger.accountant.select import account
from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import ComposedEvent, LaplaceEvent, PureDPEvent

PIPELINE = """
name = "small"
delta = 1e-6

[[sources]]
name = "db"
adjacency = { relation = "add_remove", unit = "user", unit_key = "uid", max_contributions = 2 }

[[releases]]
id = "count"
input = "db"
method = "laplace_count"
plugin = "builtin"
event = { kind = "laplace", noise_multiplier = 4.0 }

[[releases]]
id = "pick"
input = "db"
event = { kind = "pure_dp", epsilon = 0.25 }
"""


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.toml"
    path.write_text(PIPELINE, encoding="utf-8")
    return path


def _write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _expected() -> float:
    lifted = ComposedEvent((LaplaceEvent(2.0), PureDPEvent(0.5)))  # k = 2
    return account(lifted, Adjacency(), delta=1e-6).bound.epsilon


def test_json_output(small: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["account", str(small), "--json", "--per-release"]) == 0
    out = json.loads(capfd.readouterr().out)
    assert {
        "epsilon",
        "epsilon_lower",
        "delta",
        "method",
        "adjacency",
        "sources",
        "releases",
    } <= set(out)
    assert out["delta"] == 1e-6  # from the file
    assert out["epsilon"] == _expected()
    assert out["epsilon_lower"] <= out["epsilon"]
    assert out["epsilon"] <= 1.0 + 1e-9  # basic composition of the lifted parts: 0.5 + 0.5
    assert out["adjacency"]["unit"] == "user"
    assert out["sources"][0]["source"] == "db"
    assert out["sources"][0]["epsilon"] == out["epsilon"]
    releases = {r["id"]: r for r in out["releases"]}
    assert releases["count"]["lift_rules"] == ["laplace_l1_sensitivity_xk"]
    assert releases["count"]["lifted_event"] == "laplace(noise_multiplier=2.0)"
    assert releases["count"]["plugin"] == "builtin"
    assert releases["pick"]["lift_rules"] == ["pure_group_privacy"]
    assert releases["pick"]["bound"]["epsilon"] <= 0.5 + 1e-12


def test_readable_output(small: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["account", str(small), "--delta", "1e-5"]) == 0
    out = capfd.readouterr().out
    assert out.startswith("pipeline: small\nepsilon <= ")
    assert "at delta = 1e-05 (certified upper bound; lower bound" in out
    assert "adjacency: add/remove of one user (key 'uid', at most 2 rows per user)" in out
    assert "lifted: laplace(noise_multiplier=2.0)" in out
    assert "lifting: pure_group_privacy" in out
    assert "count [source db, row level, count 1, up to 2 rows per user" in out


def test_epsilon_query_reports_delta(small: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["account", str(small), "--epsilon", "1.0", "--json"]) == 0
    out = json.loads(capfd.readouterr().out)
    assert out["epsilon"] == 1.0
    assert 0 <= out["delta_lower"] <= out["delta"] <= 1e-9  # pure 1.0-DP in total


BAD_FILES = {
    "malformed": ("[[sources]\n", "not valid TOML"),
    "unknown_mechanism": (
        PIPELINE.replace('kind = "laplace"', 'kind = "staircase"'),
        "releases[0].event.kind: unknown mechanism 'staircase'",
    ),
    "unknown_adjacency": (
        PIPELINE.replace('relation = "add_remove"', 'relation = "swap_two"'),
        "sources[0].adjacency.relation: unknown adjacency 'swap_two'",
    ),
    "sigma_not_positive": (
        PIPELINE.replace("noise_multiplier = 4.0", "noise_multiplier = -1.0"),
        "releases[0].event.noise_multiplier: must be > 0",
    ),
    "q_out_of_range": (
        PIPELINE.replace(
            '{ kind = "pure_dp", epsilon = 0.25 }',
            '{ kind = "poisson_sampled", sampling_probability = 1.5, event = { kind = "noop" } }',
        ),
        "releases[1].event.sampling_probability: must lie in [0, 1]",
    ),
    "delta_out_of_range": (PIPELINE.replace("delta = 1e-6", "delta = 1.0"), "delta: must lie"),
    "cyclic": (
        PIPELINE
        + '[[transforms]]\nid = "a"\nkind = "partition"\ninput = "b"\nkey = "x"\n'
        + '[[transforms]]\nid = "b"\nkind = "partition"\ninput = "a"\nkey = "y"\n',
        "is on a cycle",
    ),
    "ambiguous": (
        PIPELINE.replace(
            'input = "db"\nevent = { kind = "pure_dp"',
            'input = "db"\nafter = ["other"]\nevent = { kind = "pure_dp"',
        )
        + '[[sources]]\nname = "other"\n',
        "ambiguous",
    ),
    "row_sampled_user_release": (
        PIPELINE.replace(
            '{ kind = "pure_dp", epsilon = 0.25 }',
            '{ kind = "poisson_sampled", sampling_probability = 0.1, '
            'event = { kind = "gaussian", noise_multiplier = 1.0 } }',
        ),
        "sample users rather than rows",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_give_one_line_and_exit_2(
    case: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    text, message = BAD_FILES[case]
    path = _write(tmp_path, text)
    assert main(["account", str(path)]) == 2
    captured = capfd.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("dpledger account: error: ")
    assert message in lines[0]
    assert "Fix:" in lines[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--delta", "1.5"], "--delta: must lie in (0, 1)"),
        (["--delta", "0"], "--delta: must lie in (0, 1)"),
        (["--delta", "abc"], "--delta: expected a number"),
        (["--epsilon", "inf"], "--epsilon: must be finite"),
        (["--delta", "1e-5", "--epsilon", "1"], "not allowed with argument"),
        (["--backends", "no_such_backend"], "--backends: unknown accountant 'no_such_backend'"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(
    argv: list[str], message: str, small: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["account", str(small), *argv])
    except SystemExit as exc:  # argparse usage errors exit from inside parse_args
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 1
    assert message in lines[0]
    assert "Fix:" in lines[0]


def test_missing_file(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["account", str(tmp_path / "nope.toml")]) == 2
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 1 and "cannot read the file" in err[0]


def _analytic_gaussian_sigma(eps: float, delta: float) -> float:
    """Balle & Wang (2018): the sigma whose exact delta(eps) equals delta."""

    def gap(sigma: float) -> float:
        mu = 1 / sigma
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta

    return float(brentq(gap, 0.1, 100, xtol=1e-12))


def test_calibrate_matches_the_analytic_gaussian(capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("dpledger.accountant.calibrate")
    assert main(["calibrate", "--epsilon", "1", "--delta", "1e-5", "--json"]) == 0
    out = json.loads(capfd.readouterr().out)
    exact = _analytic_gaussian_sigma(1.0, 1e-5)
    assert out["epsilon"] <= 1.0
    assert exact * (1 - 1e-9) <= out["noise_multiplier"] <= exact * (1 + 2e-4)
    assert out["adjacency"] == "add_remove"
    assert (
        main(["calibrate", "--epsilon", "1", "--delta", "1e-5", "--adjacency", "replace_one"]) == 0
    )
    text = capfd.readouterr().out
    sigma = float(text.split("noise multiplier: ")[1].split()[0])
    assert sigma == pytest.approx(2 * exact, rel=2e-4)  # replace-one doubles the sensitivity


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--epsilon", "8", "--delta", "1e-5", "--sampling-rate", "1.5"],
            "--sampling-rate: must lie in [0, 1]",
        ),
        (["--epsilon", "8", "--delta", "0"], "--delta: must lie in (0, 1)"),
        (["--epsilon", "8", "--delta", "1"], "--delta: must lie in (0, 1)"),
        (["--epsilon", "-1", "--delta", "1e-5"], "--epsilon: must be > 0"),
        (["--epsilon", "8", "--delta", "1e-5", "--steps", "0"], "--steps: must be an integer >= 1"),
        (
            ["--epsilon", "8", "--delta", "1e-5", "--steps", "2.5"],
            "--steps: must be an integer >= 1",
        ),
        (
            ["--epsilon", "8", "--delta", "1e-5", "--adjacency", "swap"],
            "--adjacency: unknown adjacency",
        ),
        (["--epsilon", "8", "--delta", "1e-5", "--sampling-rate", "0"], "--sampling-rate: is 0"),
        (["--delta", "1e-5"], "the following arguments are required: --epsilon"),
    ],
)
def test_calibrate_bad_input(
    argv: list[str], message: str, capfd: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["calibrate", *argv])
    except SystemExit as exc:
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 1
    assert message in lines[0]
    assert "Fix:" in lines[0]


def test_subprocess_exit_codes(small: Path, tmp_path: Path) -> None:
    good = subprocess.run(
        [sys.executable, "-m", "dpledger", "account", str(small), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["epsilon"] == _expected()
    bad = _write(
        tmp_path, PIPELINE.replace("noise_multiplier = 4.0", "noise_multiplier = 0"), "b.toml"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "dpledger", "account", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    assert "Traceback" not in proc.stderr
    assert "releases[0].event.noise_multiplier" in proc.stderr


def test_backends_take_a_comma_list_and_leave_the_file_alone(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, PIPELINE)
    assert main(["account", "--backends", "pld,closed_form", str(path), "--json"]) == 0
    both = json.loads(capfd.readouterr().out)
    assert (
        main(["account", "--backends", "pld", "--backends", "closed_form", str(path), "--json"])
        == 0
    )
    again = json.loads(capfd.readouterr().out)
    assert again["epsilon"] == both["epsilon"] == _expected()
    with pytest.raises(SystemExit) as info:
        main(["account", "--backends", "pld,", str(path)])
    assert info.value.code == 2
    assert "--backends" in capfd.readouterr().err


def test_every_command_states_its_defaults_and_no_python_reprs(
    capfd: pytest.CaptureFixture[str],
) -> None:
    for command in ("account", "report", "calibrate", "audit", "run", "plugins", "demo"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        text = capfd.readouterr().out
        assert "['" not in text and "{'" not in text, (command, text)
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    text = capfd.readouterr().out
    assert "(default: 1)" in text and "(default: add_remove)" in text
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "(default: md)" in capfd.readouterr().out

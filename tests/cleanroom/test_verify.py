"""``dpledger run`` is confirmed by the clean room, and ``dpledger verify`` re-checks a run.

Every builtin method's honest run (the neighbouring-output cases) is certified by the clean
room and then passes ``verify``; records edited after the run, executed steps beyond the
declaration, a declaration that is not the method's, and a run whose own process changed the
accountant or a builtin method's declaration are each named, and nothing is published.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import dpledger.accountant.select as select
from dpledger.cli import build_parser, main
from dpledger.commands._inputs import read_config
from dpledger.commands.run import RunRefused, clean_room_certifier, run_here
from dpledger.core.events import GaussianEvent
from dpledger.runtime import session
from dpledger.runtime.ledger import PrivacyLedger
from dpledger.runtime.plugin_manager import PluginHost
from dpledger.runtime.record_seal import write_seal
from dpledger.runtime.run_dir import write_run_dir
from tests.cleanroom.conftest import gaussian_epsilon
from tests.plugins.test_neighbouring_outputs import FAST, SEED, Case

CONFIG = 'data = "data.npy"\ndelta = 1e-5\n[params]\nsensitivity = 1.0\nnoise_multiplier = 2.0\n'


def _certifier(out: Path) -> Callable[[Path], None]:
    """The clean room's confirmation of a run staged for ``out``, as ``dpledger run`` asks."""
    return clean_room_certifier(
        argparse.Namespace(out=out, plugins_allow=None, plugins_block=None, plugins_timeout=None)
    )


def _certified_run(case: Case, out: Path) -> None:
    """Run ``case`` in this process and publish it as ``dpledger run`` does."""
    host = PluginHost()
    plan = session.plan(case.spec, case.params, case.adjacency, host.lower, delta=1e-5)
    result = session.execute(plan.declared, case.d, seed=SEED)
    record = session.record(plan, result)
    write_run_dir(out, result.outputs, record, {"seed": SEED}, certify=_certifier(out))


#: the primitives (seconds); the slow tier runs every builtin method
PRIMITIVES = tuple(
    c for c in FAST if c.spec.run.__module__.startswith("dpledger.plugins.primitives")
)


def _certify_and_verify(cases: tuple[Case, ...], tmp_path: Path, capfd: Any) -> None:
    outs = []
    for i, case in enumerate(cases):
        outs.append(tmp_path / f"run{i}")
        _certified_run(case, outs[-1])
    printed = capfd.readouterr().out
    assert printed.count(": verified; ") == len(cases), printed
    assert main(["verify", *map(str, outs)]) == 0, capfd.readouterr().err
    report = capfd.readouterr().out
    assert report.count("every executed step is covered by the declaration") == len(cases)
    for out in outs:
        seal = json.loads((out / "seal.json").read_text())["sha256"]
        assert "ledger.json" in seal and not list(out.glob("PRIVATE-*"))


def test_every_builtin_primitive_is_certified_and_verified(tmp_path: Path, capfd: Any) -> None:
    assert len(PRIMITIVES) >= 5
    _certify_and_verify(PRIMITIVES, tmp_path, capfd)


@pytest.mark.slow
def test_every_builtin_method_is_certified_and_verified(tmp_path: Path, capfd: Any) -> None:
    _certify_and_verify(FAST, tmp_path, capfd)


@pytest.fixture(scope="module")
def honest_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One honest run of the builtin Gaussian mechanism, made once for the module."""
    where = tmp_path_factory.mktemp("honest")
    np.save(where / "data.npy", np.linspace(0.0, 1.0, 11))
    (where / "g.toml").write_text(CONFIG)
    out = where / "out"
    args = ["run", "gaussian_mechanism", "--config", str(where / "g.toml")]
    assert main([*args, "--out", str(out), "--seed", "3"]) == 0
    honest = gaussian_epsilon(2.0, 1e-5)
    written = json.loads((out / "ledger.json").read_text())["privacy"]["epsilon"]
    assert honest <= written <= honest * (1 + 1e-4)
    return out


@pytest.fixture
def run_dir(honest_run: Path, tmp_path: Path) -> Path:
    """A copy of the honest run that a test may edit."""
    out = tmp_path / "out"
    shutil.copytree(honest_run, out)
    return out


def _epsilon(text: str) -> float:
    match = re.search(r"epsilon <= ([0-9.e+-]+)", text)
    assert match, text
    return float(match.group(1))


def _edit(out: Path, change: Callable[[dict[str, Any]], None], *, reseal: bool) -> None:
    record = json.loads((out / "ledger.json").read_text())
    change(record)
    (out / "ledger.json").write_text(json.dumps(record))
    if reseal:
        write_seal(out)


def _mismatches(out: Path, capfd: Any) -> str:
    assert main(["verify", str(out)]) == 1
    captured = capfd.readouterr()
    assert captured.out == ""
    return captured.err


def test_an_honest_run_verifies(run_dir: Path, capfd: Any) -> None:
    assert main(["verify", str(run_dir)]) == 0
    out = capfd.readouterr().out
    honest = gaussian_epsilon(2.0, 1e-5)
    assert honest <= _epsilon(out) <= honest * (1 + 1e-4) and "clean room" in out


def test_a_smaller_epsilon_written_into_the_record_is_named(run_dir: Path, capfd: Any) -> None:
    _edit(run_dir, lambda r: r["privacy"].update(epsilon=0.5), reseal=False)
    err = _mismatches(run_dir, capfd)
    assert "ledger.json was changed after the run wrote it" in err
    assert "privacy.epsilon is 0.5, below the certified bound recomputed here" in err


def test_executed_steps_beyond_the_declaration_are_named(run_dir: Path, capfd: Any) -> None:
    def more(record: dict[str, Any]) -> None:
        record["executed"]["events"].append({"kind": "gaussian", "noise_multiplier": 2.0})

    _edit(run_dir, more, reseal=True)
    err = _mismatches(run_dir, capfd)
    assert "are not covered by the declaration" in err and "changed after" not in err


def test_a_declaration_that_is_not_the_methods_is_named(run_dir: Path, capfd: Any) -> None:
    weak = {"kind": "gaussian", "noise_multiplier": 100.0}

    def weaker(record: dict[str, Any]) -> None:
        record["declared"] = record["declared_core"] = record["accounted"]["event"] = weak
        record["executed"]["events"] = [weak]
        record["privacy"]["epsilon"] = 0.01

    _edit(run_dir, weaker, reseal=True)
    err = _mismatches(run_dir, capfd)
    assert "is not what method 'gaussian_mechanism' declares" in err


def test_a_changed_output_is_named(run_dir: Path, capfd: Any) -> None:
    np.save(run_dir / "release.npy", np.zeros(1))
    assert "output release.npy was changed after the run wrote it" in _mismatches(run_dir, capfd)


def _gaussian_args(tmp_path: Path) -> argparse.Namespace:
    np.save(tmp_path / "data.npy", np.linspace(0.0, 1.0, 11))
    (tmp_path / "g.toml").write_text(CONFIG)
    args = ["run", "gaussian_mechanism", "--config", str(tmp_path / "g.toml")]
    return build_parser().parse_args([*args, "--out", str(tmp_path / "out"), "--seed", "3"])


def _smaller_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's accountant reports a hundredth of every bound."""
    original = select.account

    def smaller(*args: Any, **kwargs: Any) -> Any:
        sel = original(*args, **kwargs)
        bound = attrs.evolve(sel.bound, epsilon=sel.bound.epsilon / 100)
        return attrs.evolve(sel, bound=bound)

    monkeypatch.setattr(select, "account", smaller)


def test_a_staged_run_whose_process_changed_the_accountant_is_refused(
    tmp_path: Path, capfd: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _smaller_bounds(monkeypatch)
    args = _gaussian_args(tmp_path)
    config = read_config(args.config)
    assert run_here(args, config, PluginHost(), clean_room_certifier(args)) == 2
    assert not args.out.exists() and not (tmp_path / "out.private").exists()
    captured = capfd.readouterr()
    assert captured.out == ""
    assert "code in that process changed the accountant" in captured.err


def test_a_builtin_run_is_out_of_reach_of_its_command_process(
    tmp_path: Path, capfd: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the command's process lowers every bound and the noise of every Gaussian draw: the
    # builtin method runs whole in the clean room, where neither patch exists
    _smaller_bounds(monkeypatch)
    monkeypatch.setattr(
        PrivacyLedger, "gaussian", lambda self, value, *a, **k: np.asarray(value, dtype=float)
    )
    args = _gaussian_args(tmp_path)
    assert (
        main(
            [
                "run",
                "gaussian_mechanism",
                "--config",
                str(args.config),
                "--out",
                str(args.out),
                "--seed",
                "3",
            ]
        )
        == 0
    )
    honest = gaussian_epsilon(2.0, 1e-5)
    assert honest <= _epsilon(capfd.readouterr().out) <= honest * (1 + 1e-5)
    record = json.loads((args.out / "ledger.json").read_text())
    assert record["privacy"]["epsilon"] == pytest.approx(honest, rel=1e-9)
    released = np.load(args.out / "release.npy")
    assert np.std(released - np.linspace(0.0, 1.0, 11)) > 0.5  # noise of std 2 was drawn


def test_a_staged_run_whose_declaration_is_not_the_methods_is_refused(
    tmp_path: Path, capfd: Any
) -> None:
    # what a process that rewrote a builtin method's declaration (object.__setattr__ on its
    # frozen spec) and its ledger would stage: a consistent record of a weaker declaration
    case = FAST[0]
    assert case.spec.name == "gaussian_mechanism"
    weak = GaussianEvent(100.0)
    host = PluginHost()
    plan = session.plan(case.spec, case.params, case.adjacency, host.lower, delta=1e-5)
    result = session.execute(plan.declared, case.d, seed=SEED)
    record = session.record(plan, result)
    ledger = {**record.ledger, "declared": weak.to_dict()}
    ledger["executed"] = {"kind": "composed", "events": [weak.to_dict()]}
    weak_selection = select.account(weak, case.adjacency, delta=1e-5)
    record = attrs.evolve(
        record,
        ledger=ledger,
        declared_core=weak.to_dict(),
        accounted={"event": weak.to_dict(), "lift_rules": list(plan.declared.lift_rules)},
        privacy=session.privacy_section(weak_selection),
    )
    out = tmp_path / "out"
    with pytest.raises(RunRefused) as refused:
        write_run_dir(out, result.outputs, record, {"seed": SEED}, certify=_certifier(out))
    assert refused.value.code == 2
    assert not out.exists() and not (tmp_path / "out.private").exists()
    err = capfd.readouterr().err
    assert "refused, nothing written" in err
    assert "is not what method 'gaussian_mechanism' declares" in err
    assert plan.declared.per_unit.to_dict() != weak.to_dict()
    assert plan.selection.bound.epsilon > 1.0


def test_a_report_of_an_honest_run_says_how_to_reverify(run_dir: Path, capfd: Any) -> None:
    assert main(["report", str(run_dir), "--format", "md", "--no-figures"]) == 0
    text = capfd.readouterr().out
    assert "re-verify: `dpledger verify RUN_DIR` recomputes every number" in text


def test_a_report_of_an_edited_record_is_refused(run_dir: Path, capfd: Any) -> None:
    # the record's executed steps imply far more than its (unchanged) privacy section states
    def more(record: dict[str, Any]) -> None:
        step = {"kind": "gaussian", "noise_multiplier": 2.0}
        record["executed"]["events"] = [step] * 50

    _edit(run_dir, more, reseal=False)
    assert main(["report", str(run_dir), "--format", "md", "--no-figures"]) == 1
    captured = capfd.readouterr()
    assert captured.out == ""
    assert "ledger.json was changed after the run wrote it" in captured.err
    assert "are not covered by the declaration" in captured.err


def test_the_observed_methods_are_the_integrations() -> None:
    from dpledger.cleanroom.verify_room import OBSERVED_METHODS
    from dpledger.integrations.opacus import METHOD

    assert OBSERVED_METHODS == (METHOD,)

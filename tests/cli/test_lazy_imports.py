"""Start-up imports: ``--version`` and ``--help`` load no numerical library, and a command
loads only what it runs (module lists, not timings)."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from typing import Any

import pytest

from dpledger import cli

HEAVY = ("numpy", "scipy", "scipy.stats", "networkx", "torch", "dpledger.runtime.graph")


def _imported(code: str) -> set[str]:
    """Names in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    dump = "\nimport json, sys\nprint('MODULES=' + json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", code + dump],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("MODULES=")]
    assert line, out.stderr[-2000:]
    return set(json.loads(line[-1][len("MODULES=") :]))


def _run_cli(args: list[str]) -> str:
    return (
        f"from dpledger.cli import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
    )


@pytest.mark.parametrize("args", [["--version"], ["--help"], []])
def test_version_and_help_import_no_numerical_library(args: list[str]) -> None:
    names = _imported(_run_cli(args))
    assert "dpledger.cli" in names
    assert not names & set(HEAVY), sorted(names & set(HEAVY))
    assert not any(n.startswith("dpledger.commands.") for n in names)


def test_module_entry_point_version() -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dpledger", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert out.stdout.startswith("dpledger ")
    loaded = {ln.rsplit("|", 1)[1].strip() for ln in out.stderr.splitlines() if "|" in ln}
    assert not loaded & set(HEAVY)


@pytest.mark.parametrize("command", ["account", "calibrate", "audit", "plugins", "report", "run"])
def test_command_help_loads_only_its_module(command: str) -> None:
    names = _imported(_run_cli([command, "--help"]))
    assert f"dpledger.commands.{command}" in names
    if command not in ("run", "audit"):  # running a method or an audit needs numpy anyway
        assert "scipy.stats" not in names and "networkx" not in names
    if command == "run":  # the accountant and the run session load where a run is made
        assert not names & {"dpledger.accountant.select", "dpledger.runtime.session"}
    others = {f"dpledger.commands.{c}" for c in cli.COMMANDS if c != command}
    # commands share helpers through dpledger.commands._shared and ._inputs, never each other
    assert not names & others


def test_accounting_an_event_needs_neither_scipy_stats_nor_networkx() -> None:
    code = (
        "import sys\n"
        "from dpledger.cli import main\n"
        "main(['calibrate', '--epsilon', '8', '--delta', '1e-5', '--steps', '10',\n"
        "      '--sampling-rate', '0.01'])\n"
        "print(sorted(m for m in ('networkx', 'dpledger.runtime.graph', 'dpledger.audit')\n"
        "             if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    assert out.stdout.strip().endswith("[]"), out.stdout


def test_the_accountant_imports_no_heavy_scipy_module() -> None:
    """Every clean room imports the accountant: scipy.signal would pull in scipy.stats,
    interpolate and ndimage (seconds of start-up per certified number)."""
    code = (
        "import sys\n"
        "import dpledger.accountant.select\n"
        "print(sorted(m for m in ('scipy.signal', 'scipy.stats', 'scipy.interpolate',\n"
        "             'scipy.optimize', 'networkx', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_command_table_matches_the_modules() -> None:
    parser = argparse.ArgumentParser(prog="dpledger")
    sub = parser.add_subparsers(dest="command")
    names = []
    for name in cli._command_names():
        importlib.import_module(f"dpledger.commands.{name}").register(sub)
        names.append(name)
    helps = {a.dest: a.help for a in sub._choices_actions}
    assert helps == cli.COMMANDS
    assert sorted(cli.COMMANDS) == names


def test_full_parser_still_registers_every_command() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == sorted(cli.COMMANDS)
    assert cli.main(["calibrate", "--epsilon", "8", "--delta", "1e-5"]) == 0


def test_no_traceback_escapes(monkeypatch: pytest.MonkeyPatch, capfd: Any) -> None:
    from dpledger.commands import calibrate

    def boom(args: argparse.Namespace) -> int:
        raise OverflowError("math range error")

    monkeypatch.setattr(calibrate, "run", boom)
    assert cli.main(["calibrate", "--epsilon", "8", "--delta", "1e-5"]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "OverflowError: math range error" in err and "Fix: " in err

    def bug(args: argparse.Namespace) -> int:
        raise KeyError("x")

    monkeypatch.setattr(calibrate, "run", bug)
    assert cli.main(["calibrate", "--epsilon", "8", "--delta", "1e-5"]) == 3
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "internal error (KeyError" in err
    monkeypatch.setenv("DPLEDGER_TRACEBACK", "1")
    with pytest.raises(KeyError):
        cli.main(["calibrate", "--epsilon", "8", "--delta", "1e-5"])


def test_a_query_with_dominated_pairs_imports_no_scipy_optimize() -> None:
    """The dominated pairs' isotonic regression runs SciPy's compiled core without loading its
    package (accountant/isotonic.py): about a quarter of a second of every fresh process."""
    names = _imported(
        "from dpledger.accountant.select import account\n"
        "from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent\n"
        "e = SelfComposedEvent(PoissonSampledEvent(1e-4, GaussianEvent(0.8)), 100000)\n"
        "b = account(e, None, delta=1e-10).bound\n"
        "assert 0.5463 < b.epsilon_lower < b.epsilon < 0.5471, b  # (docs/accountants.md)\n"
    )
    assert "dpledger.accountant.isotonic" in names
    assert "scipy.optimize" not in names

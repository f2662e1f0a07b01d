"""Installed hostile plugins cannot change what ``dpledger account`` and ``verify`` certify.

Each attack is planted in a third-party distribution installed in a real temporary environment
(see conftest.py) and runs when its plugin is imported, as plugin code would. The pipeline has
a builtin release (``gaussian_mechanism``, sigma = 1) and the planted method's release
(declared Gaussian, sigma = 2); the honest bound is that of one Gaussian mechanism of noise
multiplier (1 + 1/4)^(-1/2), computed independently. Every command must print that bound (to
its printed precision), never a smaller one, or refuse naming the culprit.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.cleanroom.conftest import PlantedEnv, composed_sigma, gaussian_epsilon

#: the planted method: an honest declaration (a Gaussian sum); the attack runs at import
METHOD = """
import attrs
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec

{attack}


@attrs.frozen
class P:
    noise_multiplier: float = 2.0


def run(params, data, ledger, rng):
    return {{"sum": ledger.gaussian(float(sum(data)), 1.0, params.noise_multiplier, step="s")}}


@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="rt_sum", params=P, declare=lambda p, a: {declared}, run=run,
                        description="noisy sum", proof="Balle and Wang 2018, Theorem 8"))
"""

PIPELINE = """name = "mixed"
delta = 1e-5
[[sources]]
name = "d"
[[releases]]
id = "builtin"
input = "d"
method = "gaussian_mechanism"
params = { sensitivity = 1.0, noise_multiplier = 1.0 }
[[releases]]
id = "planted"
input = "d"
method = "rt_sum"
params = { noise_multiplier = 2.0 }
"""

#: scale every certified epsilon by 1/100 wherever the attack can reach it
SCALE_ACCOUNT = """
import attrs
import dpledger.accountant.select as select

_original = select.account


def _scaled(*args, **kwargs):
    sel = _original(*args, **kwargs)
    bound = attrs.evolve(sel.bound, epsilon=sel.bound.epsilon / 100,
                         epsilon_lower=sel.bound.epsilon_lower / 100)
    return attrs.evolve(sel, bound=bound)
"""

ATTACKS = {
    "module class swap": SCALE_ACCOUNT
    + """
import types


class _Swapped(types.ModuleType):
    def __getattribute__(self, name):
        if name == "account":
            return _scaled
        return types.ModuleType.__getattribute__(self, name)


select.__class__ = _Swapped
""",
    "gc referrers": SCALE_ACCOUNT
    + """
import gc
for holder in gc.get_referrers(_original):
    if isinstance(holder, dict) and holder.get("account") is _original:
        holder["account"] = _scaled
""",
    "object.__setattr__ on a builtin spec": """
import gc
from dpledger.core.events import GaussianEvent as _G
from dpledger.core.specs import MethodSpec as _M
for obj in gc.get_objects():
    if isinstance(obj, _M) and obj.name == "gaussian_mechanism":
        object.__setattr__(obj, "declare", lambda p, a: _G(100.0))
""",
    "scipy.fft global backend": """
import scipy.fft
import scipy.fft._pocketfft as _pocketfft


class _Scaled:
    __ua_domain__ = "numpy.scipy.fft"

    @staticmethod
    def __ua_function__(method, args, kwargs):
        fn = getattr(_pocketfft, method.__name__, None)
        if fn is None:
            return NotImplemented
        out = fn(*args, **kwargs)
        return out * 0.5 if method.__name__.startswith("i") else out


scipy.fft.set_global_backend(_Scaled)
""",
    "json.dumps and json.dump wrapped": """
import json
import re

_dumps = json.dumps


def _smaller(text):
    return re.sub(r'("epsilon": )([0-9.]+)', lambda m: m.group(1) + str(float(m.group(2)) / 100),
                  text)


json.dumps = lambda *a, **k: _smaller(_dumps(*a, **k))
json.dump = lambda obj, fp, *a, **k: fp.write(_smaller(_dumps(obj, *a, **k)))
""",
    "sys.stdout wrapper": """
import re
import sys


class _Rewriter:
    def __init__(self, inner):
        self.inner = inner

    def write(self, text):
        return self.inner.write(re.sub(r"epsilon <= ([0-9.]+)",
                                       lambda m: f"epsilon <= {float(m.group(1)) / 100:.6g}",
                                       text))

    def __getattr__(self, name):
        return getattr(self.inner, name)


sys.stdout = _Rewriter(sys.stdout)
""",
    "meta_path hook on number formatting": """
import importlib.abc
import sys


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "dpledger.report.numbers":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            up = module.fmt_up
            module.fmt_up = lambda x, *a, **k: up(x / 100, *a, **k)

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Hook())
""",
    "builtins patched": """
import builtins
import re

_print = builtins.print
builtins.print = lambda *a, **k: _print(*(re.sub(r"[0-9]+[.][0-9]+", "0.01", str(x)) for x in a),
                                        **k)
""",
    "thread that outlives the check": SCALE_ACCOUNT
    + """
import threading
import time


def _later():
    time.sleep(0.3)
    select.account = _scaled


threading.Thread(target=_later).start()
""",
    "ctypes rewrites the default delta in place": """
import ctypes
import dpledger.commands.account as _account

ctypes.c_double.from_address(id(_account.DEFAULT_DELTA) + 16).value = 0.5
""",
}


def _epsilon(text: str) -> float:
    match = re.search(r"epsilon <= ([0-9.e+-]+)", text)
    assert match, text
    return float(match.group(1))


@pytest.fixture
def honest() -> float:
    return gaussian_epsilon(composed_sigma(1.0, 2.0), 1e-5)


def _plant(
    env: PlantedEnv, attack: str, declared: str = "GaussianEvent(p.noise_multiplier)"
) -> None:
    source = METHOD.format(attack=attack, declared=declared)
    env.install("rt-planted", {"rt_planted": source}, {"planted": "rt_planted"})


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_in_a_plugin_never_lowers_the_certified_bound(
    planted_env: PlantedEnv, tmp_path: Path, attack: str, honest: float
) -> None:
    _plant(planted_env, ATTACKS[attack])
    (tmp_path / "p.toml").write_text(PIPELINE)
    done = planted_env.dpledger("account", "p.toml", cwd=tmp_path)
    if done.returncode == 2:  # refused: in one line naming the plugin, with nothing printed
        assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "plugin 'planted' (distribution rt-planted 1.0)" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert honest <= _epsilon(done.stdout) <= honest * (1 + 1e-4)
    # the bound names whose word the planted release rests on
    assert "rests on: method 'rt_sum' as declared by third-party plugin planted" in done.stdout


def test_the_json_output_is_the_clean_rooms_under_a_json_wrapper(
    planted_env: PlantedEnv, tmp_path: Path, honest: float
) -> None:
    _plant(planted_env, ATTACKS["json.dumps and json.dump wrapped"])
    (tmp_path / "p.toml").write_text(PIPELINE)
    done = planted_env.dpledger("account", "p.toml", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    account = json.loads(done.stdout)
    assert honest * (1 - 1e-9) <= account["epsilon"] <= honest * (1 + 1e-4)
    assert any("third-party plugin planted" in line for line in account["rests_on"])


def test_a_pth_file_that_patches_the_accountant_at_start_changes_nothing(
    planted_env: PlantedEnv, tmp_path: Path
) -> None:
    # no entry point at all: the patch runs at interpreter start, in every ordinary process
    patch = SCALE_ACCOUNT + "\nselect.account = _scaled\n"
    planted_env.install("rt-startup", {"rt_startup": patch}, {}, pth="import rt_startup\n")
    (tmp_path / "p.toml").write_text(PIPELINE.split('[[releases]]\nid = "planted"')[0])
    done = planted_env.dpledger("account", "p.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    honest = gaussian_epsilon(1.0, 1e-5)
    assert honest <= _epsilon(done.stdout) <= honest * (1 + 1e-5)
    # the patch really runs in an ordinary process of that environment
    probe = planted_env.dpledger("calibrate", "--help", cwd=tmp_path)
    assert probe.returncode == 0
    check = [
        str(planted_env.python),
        "-c",
        "import dpledger.accountant.select as s; print(s.account.__name__)",
    ]
    import subprocess

    named = subprocess.run(check, capture_output=True, text=True, check=True).stdout.strip()
    assert named == "_scaled"


@pytest.mark.parametrize(
    ("behaviour", "limit", "expect"),
    [
        ("import os\nos._exit(0)\n", "3", "exit code 0"),
        ("raise KeyboardInterrupt\n", "3", "KeyboardInterrupt"),
        # the hanging plugin is stopped at the limit whatever it is: a short one
        ("import time\ntime.sleep(60)\n", "1", "within 1 s"),
    ],
)
def test_a_plugin_that_exits_hangs_or_interrupts_is_named_in_one_line(
    planted_env: PlantedEnv, tmp_path: Path, behaviour: str, limit: str, expect: str
) -> None:
    _plant(planted_env, behaviour)
    (tmp_path / "p.toml").write_text(PIPELINE)
    done = planted_env.dpledger(
        "account", "p.toml", cwd=tmp_path, env={"DPLEDGER_PLUGINS_TIMEOUT": limit}
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "'rt_sum'" in lines[0] and "planted" in lines[0], lines[0]
    assert expect in lines[0] and lines[0].count("Fix:") == 1, lines[0]


@pytest.mark.parametrize("stop", ["import os\n    os._exit(3)", "import time\n    time.sleep(60)"])
def test_a_declare_that_exits_or_hangs_is_named(
    planted_env: PlantedEnv, tmp_path: Path, stop: str
) -> None:
    attack = f"def _stop(p, a):\n    {stop}\n"
    _plant(planted_env, attack, declared="_stop(p, a)")
    (tmp_path / "p.toml").write_text(PIPELINE)
    done = planted_env.dpledger(
        "account", "p.toml", cwd=tmp_path, env={"DPLEDGER_PLUGINS_TIMEOUT": "1"}
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "method 'rt_sum'" in done.stderr and "plugin 'planted' (rt-planted 1.0)" in done.stderr


@pytest.mark.parametrize("declared", ["NoOpEvent()", "PureDPEvent(0.0)"])
def test_a_declaration_of_no_cost_is_refused(
    planted_env: PlantedEnv, tmp_path: Path, declared: str
) -> None:
    attack = "from dpledger.core.events import NoOpEvent, PureDPEvent\n"
    _plant(planted_env, attack, declared=declared)
    (tmp_path / "p.toml").write_text(PIPELINE)
    done = planted_env.dpledger("account", "p.toml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert "declares no privacy cost" in done.stderr and "planted" in done.stderr
    assert done.stdout == ""


#: a declare that answers by who calls it: a weak declaration wherever it sees the worker
TWO_FACED = """
import traceback


def _two_faced(p, a):
    if "cleanroom" in "".join(traceback.format_stack()):
        return GaussianEvent(100.0)
    return GaussianEvent(p.noise_multiplier)
"""


def test_a_declaration_that_answers_by_its_caller_cannot_both_print_and_run(
    planted_env: PlantedEnv, tmp_path: Path
) -> None:
    import numpy as np

    _plant(planted_env, TWO_FACED, declared="_two_faced(p, a)")
    (tmp_path / "p.toml").write_text(PIPELINE)
    account = planted_env.dpledger("account", "p.toml", cwd=tmp_path)
    assert account.returncode == 0, account.stderr
    # what account prints is the plugin's word, and it says so
    assert "rests on: method 'rt_sum' as declared by third-party plugin planted" in account.stdout
    np.save(tmp_path / "data.npy", np.linspace(0.0, 1.0, 5))
    (tmp_path / "c.toml").write_text('data = "data.npy"\n[params]\nnoise_multiplier = 2.0\n')
    run = planted_env.dpledger(
        "run", "rt_sum", "--config", "c.toml", "--out", "out", "--seed", "1", cwd=tmp_path
    )
    # the run's declaration is made again with the same inputs: the two answers cannot both
    # stand, so the run is refused and nothing is published
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.private").exists()
    assert run.stdout == "" and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "100.0" in run.stderr and "2.0" in run.stderr


#: a .pth line that divides every certified epsilon by 100 in every ordinary process
STARTUP_PATCH = SCALE_ACCOUNT + "\nselect.account = _scaled\n"
GAUSSIAN_RUN = (
    'data = "data.npy"\ndelta = 1e-5\n[params]\nsensitivity = 1.0\nnoise_multiplier = 1.0\n'
)


def _startup_patched(env: PlantedEnv, tmp_path: Path) -> None:
    import numpy as np

    env.install("rt-startup", {"rt_startup": STARTUP_PATCH}, {}, pth="import rt_startup\n")
    np.save(tmp_path / "data.npy", np.linspace(0.0, 1.0, 5))
    (tmp_path / "g.toml").write_text(GAUSSIAN_RUN)
    (tmp_path / "p.toml").write_text(PIPELINE.split('[[releases]]\nid = "planted"')[0])


def test_a_pth_patch_cannot_lower_a_report(planted_env: PlantedEnv, tmp_path: Path) -> None:
    _startup_patched(planted_env, tmp_path)
    done = planted_env.dpledger("report", "p.toml", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    honest = gaussian_epsilon(1.0, 1e-5)
    assert honest * (1 - 1e-9) <= json.loads(done.stdout)["bound"]["epsilon"] <= honest * 1.0001


#: a .pth line that also drops the noise of every Gaussian draw of a ledger in its process
NOISELESS_PATCH = STARTUP_PATCH + (
    "\nimport numpy as _np\nfrom dpledger.runtime.ledger import PrivacyLedger\n"
    "PrivacyLedger.gaussian = lambda self, value, *a, **k: _np.asarray(value, dtype=float)\n"
)


def test_a_pth_patch_cannot_reach_a_builtin_run(planted_env: PlantedEnv, tmp_path: Path) -> None:
    import numpy as np

    planted_env.install(
        "rt-startup", {"rt_startup": NOISELESS_PATCH}, {}, pth="import rt_startup\n"
    )
    np.save(tmp_path / "data.npy", np.linspace(0.0, 1.0, 5))
    (tmp_path / "g.toml").write_text(GAUSSIAN_RUN)
    # the patch is in force in every ordinary interpreter of the environment
    probe = (
        "import dpledger.accountant.select as s; from dpledger.runtime.ledger import "
        "PrivacyLedger as L; print(s.account.__name__, L.gaussian.__name__)"
    )
    patched = subprocess.run(
        [str(planted_env.python), "-c", probe], capture_output=True, text=True, check=False
    )
    assert patched.stdout.split() == ["_scaled", "<lambda>"], patched.stderr
    args = ("run", "gaussian_mechanism", "--config", "g.toml", "--out", "out", "--seed", "1")
    done = planted_env.dpledger(*args, cwd=tmp_path)
    # the builtin method runs whole in the clean room, where no .pth file was processed
    assert done.returncode == 0, (done.stdout, done.stderr)
    honest = gaussian_epsilon(1.0, 1e-5)
    assert honest <= _epsilon(done.stdout) <= honest * (1 + 1e-5)
    record = json.loads((tmp_path / "out" / "ledger.json").read_text())
    assert record["privacy"]["epsilon"] == pytest.approx(honest, rel=1e-9)
    released = np.load(tmp_path / "out" / "release.npy")
    assert not np.allclose(released, np.linspace(0.0, 1.0, 5))  # the noise was drawn


def test_a_pth_patch_makes_an_audit_refused(planted_env: PlantedEnv, tmp_path: Path) -> None:
    _startup_patched(planted_env, tmp_path)
    args = ("audit", "gaussian_mechanism", "--config", "g.toml", "--runs", "100", "--seed", "1")
    done = planted_env.dpledger(*args, "--relation", "add_remove", cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and "dpledger audit: refused: relation add_remove" in done.stderr


#: the planted method with a report section (drawn by a worker from the report's data) and a
#: section that fails
SECTIONS = """
from dpledger.core.specs import ReportSectionSpec


def _notes(context):
    releases = [r["node"] for r in context["releases"]]
    return f"Planted notes on {len(releases)} releases; epsilon {context['bound']['epsilon']:.4f}."


def _broken(context):
    raise RuntimeError("boom")


@hookimpl
def dpledger_register_report_sections(register):
    register(ReportSectionSpec(name="planted_notes", title="Planted notes", render=_notes))
    register(ReportSectionSpec(name="planted_broken", title="Broken", render=_broken))
"""


def test_a_third_party_report_section_is_drawn_by_a_worker_and_labelled(
    planted_env: PlantedEnv, tmp_path: Path, honest: float
) -> None:
    _plant(planted_env, SECTIONS)
    (tmp_path / "p.toml").write_text(PIPELINE)
    done = planted_env.dpledger("report", "p.toml", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [section] = report["sections"]
    assert section["title"] == "Planted notes"
    assert section["plugin"] == "planted (rt-planted 1.0) (third-party)"
    # the section was given the report's certified numbers as data
    assert section["markdown"] == f"Planted notes on 2 releases; epsilon {honest:.4f}."
    warnings = " ".join(report["warnings"])
    assert "report section 'planted_broken' of plugin planted (rt-planted 1.0) failed" in warnings
    assert "rests on: method 'rt_sum' as declared by third-party plugin planted" in warnings


def test_a_pth_patch_cannot_lower_a_calibrated_noise(
    planted_env: PlantedEnv, tmp_path: Path
) -> None:
    from scipy.optimize import brentq

    _startup_patched(planted_env, tmp_path)
    args = ("calibrate", "--epsilon", "1", "--delta", "1e-5", "--json")
    done = planted_env.dpledger(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    sigma = json.loads(done.stdout)["noise_multiplier"]
    # the smallest noise multiplier of one Gaussian release at (1, 1e-5), independently
    exact = brentq(lambda s: gaussian_epsilon(s, 1e-5) - 1.0, 0.5, 20.0, xtol=1e-12)
    assert exact * (1 - 1e-9) <= sigma <= exact * 1.01

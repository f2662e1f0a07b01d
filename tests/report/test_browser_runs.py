"""Reports of training runs as a reviewer's browser shows them (headless Chromium): a DP-SGD run
of ``dpledger run`` (1,404 steps; 14,040 in the ``slow`` tier) and a shuffled Opacus run that
dpledger observed.

Each page is opened by Chromium with a probe that reads back, per section, every sentence a
reviewer sees. Every sentence of the runtime and warnings sections must be one this test knows,
and each is checked against the run it describes (the record, the private directory, an
independent accountant): a sentence no check covers fails the test. The report command's CPU
time (``getrusage`` of the command and the clean room it starts) and the page's size are
measured and printed, and held to 5 s and 50 KB.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    GaussianEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
    event_from_dict,
)
from dpledger.report.numbers import fmt_down, fmt_up
from dpledger.runtime import session
from dpledger.runtime.plugin_manager import PluginHost
from dpledger.runtime.run_dir import write_run_dir
from dpledger.runtime.run_record import RunRecord

BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)

pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no headless Chromium installed (apt-get install chromium)"
)

DELTA = 1e-5
#: an MNIST-sized schedule: 60 000 records in expected batches of 256, noise 1.1
Q, SIGMA = 256 / 60000, 1.1
MAX_BYTES = 50_000
MAX_CPU_SECONDS = 5.0

PROBE = """
<script>
window.addEventListener("load", () => {
  const sections = {};
  let title = "";
  for (const node of document.body.children) {
    if (node.tagName === "H2") { title = node.innerText.trim(); sections[title] = []; continue; }
    if (!title) continue;
    const items = node.tagName === "UL" ? [...node.querySelectorAll("li")] : [node];
    for (const item of items) sections[title].push(item.innerText.trim());
  }
  const images = [...document.querySelectorAll("img")];
  const out = document.createElement("pre");
  out.id = "dpledger-probe";
  out.textContent = JSON.stringify({
    sections: sections,
    images: images.length,
    broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).length,
    width: document.documentElement.clientWidth,
    widest: Math.max(0, ...[...document.querySelectorAll("table")].map(
      t => (t.closest(".wide, .section") || t).getBoundingClientRect().right)),
    text: document.body.innerText,
  });
  document.body.appendChild(out);
});
</script>
"""


CHROMIUM_FLAGS = (
    str(BROWSER),
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--window-size=1280,900",
    "--virtual-time-budget=5000",
    "--dump-dom",
)


def _probe(page: Path, tmp_path: Path) -> dict[str, Any]:
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
    assert BROWSER is not None
    result = subprocess.run(
        [*CHROMIUM_FLAGS, probed.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    found = re.search(r'<pre id="dpledger-probe">(.*?)</pre>', result.stdout, flags=re.S)
    assert found, result.stderr[-2000:]
    text = found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    out: dict[str, Any] = json.loads(text)
    return out


def _report(run: Path, tmp_path: Path) -> tuple[Path, float]:
    """``dpledger report RUN --format html``: the page and the CPU seconds it took (the
    command's process and every process it waited for, the clean room included)."""
    page = tmp_path / f"{run.name}.html"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "dpledger.cli", "report", str(run), "--format", "html"]
    done = subprocess.run(
        [*command, "--out", str(page)],
        capture_output=True,
        text=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr[-2000:]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"{run.name}: report {page.stat().st_size} bytes, {cpu:.2f} s of CPU")
    return page, cpu


# -- the runs ------------------------------------------------------------------------------------
def _dp_sgd_run(out: Path, steps: int) -> Path:
    host = PluginHost.create(builtin_only=True)
    spec = host.method("dp_sgd_logistic")
    params = spec.make_params(
        {
            "steps": steps,
            "sampling_probability": Q,
            "noise_multiplier": SIGMA,
            "clip_norm": 1.0,
            "expected_batch_size": 256.0,
        }
    )
    plan = session.plan(spec, params, Adjacency(), host.lower, delta=DELTA)
    rng = np.random.default_rng(0)
    data = np.hstack([rng.normal(size=(30, 2)), rng.random((30, 1)) > 0.5])
    result = session.execute(plan.declared, data, seed=7)
    write_run_dir(out, result.outputs, session.record(plan, result), {"seed": 7})
    return out


def _opacus_run(out: Path, records: int, batch: int, epochs: int) -> Path:
    from dpledger.integrations.opacus import SHUFFLED, Batching, OpacusResult, explain, write_run

    batching = Batching(SHUFFLED, records, records // batch, batch_size=batch)
    event = SelfComposedEvent(ShuffledBatchesEvent(records, batch, GaussianEvent(1.0)), epochs)
    selection = select.account(event, batching.adjacency, delta=DELTA)
    upper, lower = float(selection.bound.epsilon), float(selection.bound.epsilon_lower)
    status, line = explain(batching, upper, lower, 1.67, "prv", batch / records)
    steps = epochs * (records // batch)
    result = OpacusResult(
        delta=DELTA,
        batching=batching,
        steps=steps,
        noise_multipliers=(1.0,),
        max_grad_norms=(1.0,),
        epochs=epochs,
        complete_epochs=epochs,
        event=event,
        lower_event=event,
        adjacency=batching.adjacency,
        epsilon=upper,
        epsilon_lower=lower,
        method=selection.bound.method,
        selection=selection,
        opacus_epsilon=1.67,
        opacus_accountant="prv",
        opacus_history=((1.0, batch / records, steps),),
        opacus_status=status,
        explanation=line,
    )
    return write_run(out, result)


# -- what each sentence claims, and the check of it -----------------------------------------------
Check = Callable[[re.Match[str]], bool]


def _record(run: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((run / "ledger.json").read_text(encoding="utf-8"))
    return out


def _bracket(run: Path) -> tuple[float, float]:
    record = RunRecord.from_json(_record(run))
    bound = select.account(record.core_event(), record.adjacency, delta=DELTA).bound
    return float(bound.epsilon_lower), float(bound.epsilon)


def _independent_epsilon(steps: int) -> float:
    """dp-accounting's PLD epsilon of the same DP-SGD schedule (Poisson, add/remove)."""
    from dp_accounting import dp_event, pld

    accountant = pld.PLDAccountant(value_discretization_interval=1e-4)
    step = dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(SIGMA))
    accountant.compose(dp_event.SelfComposedDpEvent(step, steps))
    return float(accountant.get_epsilon(DELTA))


def _check_all(sentences: list[str], checks: Mapping[str, Check]) -> None:
    """Every sentence matches a known pattern whose check holds."""
    for sentence in sentences:
        matched = [(p, re.fullmatch(p, sentence, flags=re.S)) for p in checks]
        hits = [(p, m) for p, m in matched if m is not None]
        assert hits, f"a sentence no check covers: {sentence!r}"
        for pattern, found in hits:
            assert checks[pattern](found), f"false: {sentence!r} (check {pattern!r})"


def _dp_sgd_checks(run: Path, steps: int) -> dict[str, Check]:
    record = _record(run)
    private_file = run.parent / f"{run.name}.private" / "PRIVATE-diagnostics.json"
    private = json.loads(private_file.read_text(encoding="utf-8"))
    ledger_text = (run / "ledger.json").read_text(encoding="utf-8")
    executed = event_from_dict(record["executed"])
    steps_executed = sum(k for _, k in _leaves(executed))
    return {
        r"method: (\S+)": lambda m: m.group(1) == record["method"] == "dp_sgd_logistic",
        r"ledger verified \(every executed step covered by the declaration\): yes": lambda m: (
            record["verified"] is True
        ),
        r"re-verify: .*": lambda m: "dpledger verify" in m.group(0),
        r"seed: not published \(private diagnostics\); secure seed: (True|False)": lambda m: (
            private["seed"] == 7
            and '"seed": 7' not in ledger_text
            and m.group(1) == str(record["secure_seed"])
        ),
        r"declared: self_composed\(count=(\d+), .*": lambda m: int(m.group(1)) == steps,
        r"executed: .*count=(\d+).*": lambda m: int(m.group(1)) == steps == steps_executed,
        r"recorded at run time: ε ≤ (\S+) at δ = (\S+) \((\w+)\)": lambda m: (
            m.group(1) == fmt_up(record["privacy"]["epsilon"]) and float(m.group(2)) == DELTA
        ),
        r"outputs: (.*)": lambda m: all(
            (run / f"{name}.npy").is_file() for name in m.group(1).split(", ")
        ),
        r"idealized numerics: noise is drawn in floating point from a numpy generator; .*": (
            lambda m: record["method"] == "dp_sgd_logistic" and record["verified"] is True
        ),
        r"release 'dp_sgd_logistic': method 'dp_sgd_logistic' has trust tier (\w+) .*": (
            lambda m: m.group(1) == record["provenance"]["tier"]
        ),
    }


def _leaves(event: Any) -> list[tuple[Any, int]]:
    from dpledger.core.events import flatten

    return list(flatten(event))


def _opacus_checks(run: Path, steps: int, epochs: int) -> dict[str, Check]:
    record = _record(run)
    lower, upper = _bracket(run)
    own = record["params"]["opacus"]
    return {
        r"method: opacus_dp_sgd": lambda m: record["method"] == "opacus_dp_sgd",
        r"observed, not run under the dpledger ledger: .*": lambda m: (
            record["method"] == "opacus_dp_sgd"
        ),
        r"noise: drawn by Opacus, not by dpledger: .* \(Opacus secure mode: (on|off)\)": (
            lambda m: (
                (m.group(1) == "on") == bool(record.get("secure_seed"))
                and not (run.parent / f"{run.name}.private").exists()
            )
        ),
        r"re-check: .*": lambda m: "only dpledger run seals a run" in m.group(0),
        r"observed: .*count=(\d+).* \((\d+) noisy steps in (\d+) epoch\(s\)\)": lambda m: (
            int(m.group(1)) == epochs and int(m.group(2)) == steps and int(m.group(3)) == epochs
        ),
        r"recorded at run time: ε ≤ (\S+) at δ = (\S+) \(pld\)": lambda m: (
            m.group(1) == fmt_up(upper) and float(m.group(2)) == DELTA
        ),
        r"Opacus's own figure \(prv\): ε = ([\d.]+); accounts Poisson sampling at q=([\d.]+), "
        r"which did not run: no theorem covers this run": lambda m: (
            float(m.group(1)) == own["epsilon"]
            and record["params"]["batching"]["kind"] != "poisson"
        ),
        r"Opacus's accountants: the record holds Opacus's prv figure only; .*": lambda m: (
            own["accountant"] == "prv"
        ),
        r"Poisson sampling at Opacus's rate under the same relation \(did not run\): ε ≤ (\S+)": (
            lambda m: float(m.group(1)) <= upper
        ),
        r"note: .*": lambda m: m.group(0)[len("note: ") :] in record["params"]["notes"],
        r"idealized numerics: the noise was drawn in floating point by Opacus, not by "
        r"dpledger; .*": lambda m: record["method"] == "opacus_dp_sgd",
        r"the certified bracket is wide \(lower (\S+), upper (\S+)\): .*": lambda m: (
            m.group(1) == fmt_down(lower) and m.group(2) == fmt_up(upper) and upper > 1.25 * lower
        ),
        r"release 'opacus_dp_sgd' was observed, not run under the dpledger ledger \(tier "
        r"unverified\): .*": lambda m: record["method"] == "opacus_dp_sgd",
    }


# -- the tests -----------------------------------------------------------------------------------
def _dp_sgd(tmp_path: Path, steps: int) -> None:
    run = _dp_sgd_run(tmp_path / f"dp_sgd_{steps}", steps)
    page, cpu = _report(run, tmp_path)
    assert page.stat().st_size <= MAX_BYTES
    assert cpu <= MAX_CPU_SECONDS
    seen = _probe(page, tmp_path)
    assert seen["images"] >= 2 and seen["broken"] == 0
    assert seen["widest"] <= seen["width"] + 1
    lower, upper = _bracket(run)
    independent = _independent_epsilon(steps)
    print(f"bracket [{lower}, {upper}], dp-accounting {independent}")
    # the formal statement and the bracket: certified, and dp-accounting's value inside them
    statement = " ".join(seen["sections"]["Formal statement"])
    assert f"ε = {fmt_up(upper)} (certified upper bound, method pld)" in statement
    assert f"Certified bracket: {fmt_down(lower)} ≤ ε ≤ {fmt_up(upper)}" in statement
    assert lower <= independent <= upper * (1 + 1e-3)
    assert f"Poisson subsampling at rate {Q:.6g}" in seen["text"].replace("≈", "")
    _check_all(seen["sections"]["Runtime ledger"], _dp_sgd_checks(run, steps))
    _check_all(seen["sections"]["Warnings"], _dp_sgd_checks(run, steps))
    # no section of a plugin whose methods the run does not release
    assert "Lemma 3.1" not in seen["text"] and "section by plugin" not in seen["text"]


def _opacus(tmp_path: Path, records: int, batch: int, epochs: int) -> None:
    run = _opacus_run(tmp_path / "opacus_shuffled", records, batch, epochs)
    page, cpu = _report(run, tmp_path)
    assert page.stat().st_size <= MAX_BYTES
    assert cpu <= MAX_CPU_SECONDS
    seen = _probe(page, tmp_path)
    assert seen["images"] >= 2 and seen["broken"] == 0
    lower, upper = _bracket(run)
    record = _record(run)
    statement = " ".join(seen["sections"]["Formal statement"])
    # Opacus's own figure and the explanation, beside the certified bracket
    assert "Opacus's own figure (prv accountant, not certified by dpledger): ε = 1.67" in statement
    assert record["params"]["explanation"] in statement
    assert "Opacus's 1.67 is below the certified lower bound" in statement and lower > 1.67
    assert f"Certified bracket: {fmt_down(lower)} ≤ ε ≤ {fmt_up(upper)}" in statement
    assert "batches were shuffled" in statement
    assert record["params"]["batching"]["kind"] == "shuffled"
    for claim in ("ledger verified", "private diagnostics", "numpy generator"):
        assert claim not in seen["text"], claim
    steps = epochs * (records // batch)
    _check_all(seen["sections"]["Runtime ledger"], _opacus_checks(run, steps, epochs))
    _check_all(seen["sections"]["Warnings"], _opacus_checks(run, steps, epochs))
    assert "Lemma 3.1" not in seen["text"]


def test_dp_sgd_run_of_1404_steps(tmp_path: Path) -> None:
    _dp_sgd(tmp_path, 1404)


@pytest.mark.slow
def test_dp_sgd_run_of_14040_steps(tmp_path: Path) -> None:
    _dp_sgd(tmp_path, 14040)


def test_shuffled_opacus_run(tmp_path: Path) -> None:
    _opacus(tmp_path, 40, 20, 1)


@pytest.mark.slow
def test_shuffled_opacus_run_of_two_epochs(tmp_path: Path) -> None:
    _opacus(tmp_path, 200, 20, 2)

"""Reports as a browser renders them (headless Chromium, Debian's ``chromium`` package).

Skipped with the reason when no Chromium is installed (``apt-get install chromium``). The page
is opened at 1280 px with a probe script appended; the probe writes what it measured into the
DOM, which Chromium dumps: raw Markdown left in the text, tables (or their scrolling box) wider
than the page, images that did not load, and the headline epsilon.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dpledger.cli import main
from dpledger.report.numbers import fmt_up
from tests.conftest import TinyDemo

BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no headless Chromium installed (apt-get install chromium)"
)

PROBE = """
<script>
window.addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const boxes = [...document.querySelectorAll("table")].map(
    t => (t.closest(".wide, .section") || t).getBoundingClientRect().right);
  const images = [...document.querySelectorAll("img")];
  const text = document.body.innerText;
  const out = document.createElement("pre");
  out.id = "dpledger-probe";
  out.textContent = JSON.stringify({
    width: width,
    widest: Math.max(0, ...boxes),
    tables: boxes.length,
    images: images.length,
    broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).length,
    markdown: /\\*\\*|\\|---|^#{1,6} /m.test(text),
    statement: (document.querySelector(".statement") || document.body).innerText,
  });
  document.body.appendChild(out);
});
</script>
"""


def probe(html_file: Path, tmp_path: Path) -> dict[str, object]:
    page = tmp_path / f"probed-{html_file.name}"
    page.write_text(html_file.read_text().replace("</body>", PROBE + "</body>"))
    assert BROWSER is not None
    result = subprocess.run(
        [
            BROWSER,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,900",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r'<pre id="dpledger-probe">(.*?)</pre>', result.stdout, flags=re.S)
    assert found, result.stderr[-2000:]
    text = found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    out: dict[str, object] = json.loads(text)
    return out


def _check(measured: dict[str, object], epsilon: float) -> None:
    assert measured["tables"], "the report has tables"
    assert float(measured["widest"]) <= float(measured["width"]) + 1, measured  # type: ignore[arg-type]
    assert measured["broken"] == 0, measured
    assert measured["markdown"] is False, "raw Markdown in the rendered page"
    assert f"ε = {fmt_up(epsilon)}" in str(measured["statement"])


def test_a_pipeline_naming_registered_methods(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        'delta = 1e-6\n[[sources]]\nname = "visits"\n'
        '[[releases]]\nid = "count"\ninput = "visits"\n'
        'method = "laplace_mechanism"\nparams = {sensitivity = 1.0, noise_multiplier = 10.0}\n'
        '[[releases]]\nid = "train"\ninput = "visits"\ncount = 500\n'
        'event = { kind = "poisson_sampled", sampling_probability = 0.01, '
        'event = { kind = "gaussian", noise_multiplier = 1.0 } }\n'
    )
    assert main(["account", str(path), "--json"]) == 0
    epsilon = json.loads(capfd.readouterr().out)["epsilon"]
    out = tmp_path / "report.html"
    assert main(["report", str(path), "--format", "html", "--out", str(out)]) == 0
    measured = probe(out, tmp_path)
    assert measured["images"], "the report embeds its figures"
    _check(measured, epsilon)


def test_the_demo_report(tiny_demo: TinyDemo, tmp_path: Path) -> None:
    record = json.loads((tiny_demo.out / "ledger.json").read_text())
    report = json.loads((tiny_demo.out / "report.json").read_text())
    assert report["bound"]["epsilon"] <= record["privacy"]["epsilon"] * (1 + 1e-9)
    _check(probe(tiny_demo.out / "report.html", tmp_path), report["bound"]["epsilon"])

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]


@pytest.mark.slow
def test_table2_tiny_real_and_direct(tmp_path: Path) -> None:
    out = tmp_path / "t2.json"
    subprocess.run(
        [sys.executable, "-m", "experiments.path.table2", "--methods", "real", "direct_markov",
         "--epsilons", "10", "--n-users", "150", "--length", "6", "--bins", "6", "--iters", "100",
         "--out", str(out)],
        cwd=ROOT, check=True, timeout=600,
    )
    rows = json.loads(out.read_text())["rows"]
    real, direct = rows
    assert real["method"] == "real" and direct["method"] == "direct_markov"
    # real subsample is closer to held-out data than the flattened baseline on HMM likelihood
    assert real["hmm_loglik_w1"] < direct["hmm_loglik_w1"]

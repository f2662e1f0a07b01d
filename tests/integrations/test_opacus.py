"""Opacus interop: the batch construction and steps of a PrivacyEngine run, accounted."""

from __future__ import annotations

import json
import math
import runpy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpledger.accountant.select import account
from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)
from dpledger.integrations.opacus import (
    FIXED_ORDER,
    POISSON,
    SHUFFLED,
    Batching,
    OpacusTracker,
    Step,
    make_private,
    run_events,
)
from dpledger.runtime.run_record import RECORD_FILE, RunRecord

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

ROOT = Path(__file__).resolve().parents[2]
DELTA = 1e-5
N, B, SIGMA = 200, 20, 1.0

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*[Ss]ecure RNG turned off"),
    pytest.mark.filterwarnings("ignore:Full backward hook is firing"),
    pytest.mark.filterwarnings("ignore:Optimal order is the"),
]


def _loader(*, shuffle: bool = True, drop_last: bool = False, n: int = N, b: int = B) -> Any:
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    y = torch.randint(0, 2, (n,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=b, shuffle=shuffle, drop_last=drop_last)


def _engine(
    *, poisson: bool, accountant: str = "prv", **loader_kwargs: Any
) -> tuple[Any, Any, Any, Any, OpacusTracker]:
    from opacus import PrivacyEngine

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    engine = PrivacyEngine(accountant=accountant)
    model, optimizer, loader, tracker = make_private(
        engine,
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=_loader(**loader_kwargs),
        noise_multiplier=SIGMA,
        max_grad_norm=1.0,
        poisson_sampling=poisson,
    )
    return engine, model, optimizer, loader, tracker


def _train(model: Any, optimizer: Any, loader: Any, epochs: int, limit: int | None = None) -> int:
    loss_fn = torch.nn.CrossEntropyLoss()
    done = 0
    for _ in range(epochs):
        for i, (xb, yb) in enumerate(loader):
            if limit is not None and i >= limit:
                break
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
            done += 1
    return done


@pytest.fixture(scope="module")
def poisson_run() -> Iterator[tuple[Any, OpacusTracker]]:
    engine, model, optimizer, loader, tracker = _engine(poisson=True)
    _train(model, optimizer, loader, epochs=2)
    yield engine, tracker


@pytest.fixture(scope="module")
def shuffled_run() -> Iterator[tuple[Any, OpacusTracker]]:
    engine, model, optimizer, loader, tracker = _engine(poisson=False)
    _train(model, optimizer, loader, epochs=2)
    yield engine, tracker


# -- what is recorded ---------------------------------------------------------------------------
def test_poisson_loader_is_poisson_sampling(poisson_run: tuple[Any, OpacusTracker]) -> None:
    engine, tracker = poisson_run
    b = tracker.batching
    assert b.kind == POISSON and b.dataset_size == N
    assert b.sample_rate == pytest.approx(B / N)
    steps = sum(h[2] for h in engine.accountant.history)
    assert len(tracker.steps) == steps == 2 * (N // B)
    assert tracker.adjacency == Adjacency()
    q = b.sample_rate
    assert q is not None
    assert tracker.event() == SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(SIGMA)), steps)
    assert {s.noise_multiplier for s in tracker.steps} == {SIGMA}
    assert {s.max_grad_norm for s in tracker.steps} == {1.0}


def test_shuffled_loader_is_shuffled_epochs(shuffled_run: tuple[Any, OpacusTracker]) -> None:
    engine, tracker = shuffled_run
    b = tracker.batching
    assert (b.kind, b.dataset_size, b.batch_size, b.batches_per_epoch) == (SHUFFLED, N, B, 10)
    assert len(tracker.steps) == 20 == sum(h[2] for h in engine.accountant.history)
    assert [s.epoch for s in tracker.steps] == [1] * 10 + [2] * 10
    assert tracker.adjacency == Adjacency(relation="replace_one")
    assert tracker.event() == SelfComposedEvent(ShuffledBatchesEvent(N, B, GaussianEvent(SIGMA)), 2)


def test_fixed_order_loader_costs_one_gaussian_per_epoch() -> None:
    _, model, optimizer, loader, tracker = _engine(poisson=False, shuffle=False)
    _train(model, optimizer, loader, epochs=2, limit=3)
    assert tracker.batching.kind == FIXED_ORDER
    # the first batch runs in both epochs: exactly two Gaussian releases, tight
    assert tracker.event() == SelfComposedEvent(GaussianEvent(SIGMA), 2)
    result = tracker.result(DELTA)
    assert result.epsilon_lower == pytest.approx(result.epsilon, rel=1e-6)
    assert "fixed order" in result.explanation


def test_partial_epochs_count_in_full_for_the_upper_bound_only() -> None:
    _, model, optimizer, loader, tracker = _engine(poisson=False)
    # three passes over the loader, each left after 2 of its 10 batches: three reshuffles
    assert _train(model, optimizer, loader, epochs=3, limit=2) == 6
    upper, lower, epochs, complete = run_events(tracker.batching, tracker.steps)
    assert upper == SelfComposedEvent(ShuffledBatchesEvent(N, B, GaussianEvent(SIGMA)), 3)
    assert lower is None and (epochs, complete) == (3, 0)
    _train(model, optimizer, loader, epochs=1)  # one full epoch
    result = tracker.result(DELTA)
    full = SelfComposedEvent(ShuffledBatchesEvent(N, B, GaussianEvent(SIGMA)), 1)
    assert result.event == SelfComposedEvent(full.event, 4)
    assert result.lower_event == full
    expected_lower = account(full, Adjacency(relation="replace_one"), delta=DELTA).bound
    assert result.epsilon_lower == pytest.approx(expected_lower.epsilon_lower, rel=1e-12)
    assert any("part of their batches" in n for n in result.notes)


def test_drop_last_with_a_remainder_certifies_no_lower_bound() -> None:
    _, model, optimizer, loader, tracker = _engine(poisson=False, drop_last=True, b=30)
    _train(model, optimizer, loader, epochs=1)
    b = tracker.batching
    assert (b.batches_per_epoch, b.remainder, b.drop_last) == (6, 20, True)
    assert len(tracker.steps) == 6
    result = tracker.result(DELTA)
    assert result.event == SelfComposedEvent(ShuffledBatchesEvent(N, 30, GaussianEvent(SIGMA)), 1)
    assert result.epsilon_lower == 0.0
    assert any("drop_last" in n for n in result.notes)


def test_steps_are_public_facts_only(shuffled_run: tuple[Any, OpacusTracker]) -> None:
    _, tracker = shuffled_run
    for step in tracker.steps:
        assert set(step.to_dict()) == {
            "step",
            "noise_multiplier",
            "max_grad_norm",
            "epoch",
            "batches",
        }


def test_changing_noise_multipliers_compose() -> None:
    poisson = Batching(POISSON, 100, 10, sample_rate=0.1)
    steps = (Step(1.0, 1.0, 0), Step(2.0, 1.0, 0), Step(1.0, 1.0, 0))
    upper, lower, _, _ = run_events(poisson, steps)
    a = PoissonSampledEvent(0.1, GaussianEvent(1.0))
    b = PoissonSampledEvent(0.1, GaussianEvent(2.0))
    assert upper == lower == ComposedEvent([SelfComposedEvent(a, 2), SelfComposedEvent(b, 1)])
    shuffled = Batching(SHUFFLED, 100, 10, batch_size=10)
    mixed = (Step(2.0, 1.0, 1), Step(1.0, 1.0, 1))  # within one epoch: the smaller multiplier
    upper, lower, epochs, complete = run_events(shuffled, mixed)
    assert upper == SelfComposedEvent(ShuffledBatchesEvent(100, 10, GaussianEvent(1.0)), 1)
    assert lower is None and (epochs, complete) == (1, 0)


def test_unsupported_constructions_are_refused() -> None:
    shuffled = Batching(SHUFFLED, 100, 10, batch_size=10)
    # two batches summed into one noisy step: each record is still in one step of the epoch
    upper, lower, _, _ = run_events(shuffled, (Step(1.0, 1.0, 1, batches=2),))
    assert upper == SelfComposedEvent(ShuffledBatchesEvent(100, 10, GaussianEvent(1.0)), 1)
    assert lower is None
    with pytest.raises(UnsupportedEventError, match="several steps"):
        run_events(shuffled, tuple(Step(1.0, 1.0, 1) for _ in range(11)))
    with pytest.raises(UnsupportedEventError, match="attach the tracker"):
        run_events(shuffled, (Step(1.0, 1.0, 0),))
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

    data = TensorDataset(torch.zeros(10, 4), torch.zeros(10, dtype=torch.long))
    weighted = DataLoader(
        data, batch_size=2, sampler=WeightedRandomSampler([1.0] * 10, 10, replacement=False)
    )
    model = torch.nn.Linear(4, 2)
    engine = PrivacyEngine()
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=weighted,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    with pytest.raises(UnsupportedEventError, match="WeightedRandomSampler without replacement"):
        OpacusTracker.attach(engine, optimizer, loader)
    with pytest.raises(InvalidParameterError, match="DPOptimizer"):
        OpacusTracker.attach(engine, torch.optim.SGD(model.parameters(), lr=0.1), loader)


def test_attaching_after_training_started_is_refused() -> None:
    engine, model, optimizer, loader, tracker = _engine(poisson=True)
    tracker.detach()
    _train(model, optimizer, loader, epochs=1, limit=1)
    with pytest.raises(InvalidParameterError, match="before the first optimizer step"):
        OpacusTracker.attach(engine, optimizer, loader)


# -- the printed numbers ------------------------------------------------------------------------
def test_poisson_epsilon_is_account_of_the_event_and_agrees_with_opacus(
    poisson_run: tuple[Any, OpacusTracker],
) -> None:
    from opacus.accountants import RDPAccountant

    engine, tracker = poisson_run
    result = tracker.result(DELTA)
    expected = account(tracker.event(), Adjacency(), delta=DELTA).bound
    assert result.epsilon == expected.epsilon
    assert result.epsilon_lower == expected.epsilon_lower
    assert result.opacus_epsilon == engine.get_epsilon(DELTA)
    assert result.opacus_accountant == "prv"
    rdp = RDPAccountant()
    rdp.history = list(engine.accountant.history)
    assert result.epsilon <= rdp.get_epsilon(DELTA)
    assert result.opacus_epsilon is not None
    assert abs(result.epsilon - result.opacus_epsilon) <= 0.02 * result.opacus_epsilon
    assert result.epsilon_lower <= result.epsilon
    assert result.opacus_epsilon >= result.epsilon_lower  # Opacus's PRV is not below it
    assert "agrees with the certified upper bound" in result.explanation


def test_poisson_under_the_rdp_accountant_is_looser() -> None:
    _, model, optimizer, loader, tracker = _engine(poisson=True, accountant="rdp")
    _train(model, optimizer, loader, epochs=1)
    result = tracker.result(DELTA)
    assert result.opacus_accountant == "rdp"
    assert result.opacus_epsilon is not None and result.opacus_epsilon > result.epsilon
    assert "RDP upper bound" in result.opacus_status


def test_shuffled_bracket_lies_above_opacus_poisson_figure(
    shuffled_run: tuple[Any, OpacusTracker],
) -> None:
    engine, tracker = shuffled_run
    result = tracker.result(DELTA)
    expected = account(tracker.event(), Adjacency(relation="replace_one"), delta=DELTA).bound
    assert (result.epsilon, result.epsilon_lower) == (expected.epsilon, expected.epsilon_lower)
    # Opacus accounts Poisson sampling at q = 1/len(loader): a number for a run that did not
    # happen, below what this run certifiably spent
    assert result.opacus_epsilon == engine.get_epsilon(DELTA)
    assert result.opacus_epsilon is not None
    assert result.opacus_epsilon < result.epsilon_lower < result.epsilon
    assert result.poisson_same_relation is not None
    assert result.poisson_same_relation < result.epsilon_lower
    text = result.summary()
    assert "certified upper bound" in text and "certified lower bound" in text
    assert "no theorem covers this run" in text
    assert "Opacus accounts Poisson sampling, but batches were shuffled" in text
    assert "below the certified lower bound" in text


# -- the run directory ----------------------------------------------------------------------------
def test_run_directory_is_read_by_report(
    shuffled_run: tuple[Any, OpacusTracker], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _, tracker = shuffled_run
    out = tracker.write_run(tmp_path / "run", DELTA)
    data = json.loads((out / RECORD_FILE).read_text())
    record = RunRecord.from_json(data)
    assert record.core_event() == tracker.event()
    assert record.adjacency == Adjacency(relation="replace_one")
    assert record.params["opacus"]["accountant"] == "prv"
    assert sorted(p.name for p in out.iterdir()) == [RECORD_FILE, "outputs.json"]
    assert main(["report", str(out), "--format", "json", "--backends", "pld"]) == 0
    report = json.loads(capfd.readouterr().out)
    bound = report["bound"]
    result = tracker.result(DELTA)
    assert math.isclose(bound["epsilon"], result.epsilon, rel_tol=1e-12)
    with pytest.raises(InvalidParameterError, match="not an empty directory"):
        tracker.write_run(out, DELTA)


def test_importing_the_integration_does_not_import_torch() -> None:
    code = (
        "import sys, dpledger.integrations.opacus as m; "
        "assert 'torch' not in sys.modules and 'opacus' not in sys.modules, 'eager'; "
        "print(m.METHOD)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "opacus_dp_sgd"


def test_example_runs_both_ways(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sklearn")
    example = runpy.run_path(str(ROOT / "examples" / "opacus_digits.py"), run_name="example")
    assert example["main"](["--epochs", "1", "--out", str(tmp_path / "runs")]) == 0
    text = capfd.readouterr().out
    assert text.count("  certified upper bound ") == 2
    assert "agrees with the certified upper bound" in text
    assert "Opacus accounts Poisson sampling, but batches were shuffled" in text
    assert "flagged [" not in text and "NOT COVERED" not in text  # a correct script
    for name in ("poisson", "shuffled"):
        assert (tmp_path / "runs" / name / RECORD_FILE).is_file()


@pytest.mark.slow
def test_example_numbers_in_the_docs(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sklearn")
    example = runpy.run_path(str(ROOT / "examples" / "opacus_digits.py"), run_name="example")
    assert example["main"](["--out", str(tmp_path / "runs")]) == 0
    text = capfd.readouterr().out
    doc = (ROOT / "docs" / "opacus.md").read_text()
    shuffled = text[text.index("training accuracy (shuffled)") :]
    for line in shuffled.splitlines():
        if line.startswith(("  certified", "  Opacus (prv)", "  Poisson at", "Opacus accounts")):
            assert line in doc, line
    assert "certified bracket [2.30107, 2.30134]" in text and "[2.301, 2.302]" in doc
    for name in ("poisson", "shuffled"):
        record = json.loads((tmp_path / "runs" / name / RECORD_FILE).read_text())
        assert record["method"] == "opacus_dp_sgd"


# -- both of Opacus's accountants -----------------------------------------------------------------
def _opacus_accountants(history: list[Any]) -> dict[str, float]:
    from opacus.accountants import PRVAccountant, RDPAccountant

    out = {}
    for name, cls in (("prv", PRVAccountant), ("rdp", RDPAccountant)):
        accountant = cls()
        accountant.history = list(history)
        out[name] = accountant.get_epsilon(DELTA)
    return out


@pytest.mark.parametrize("run", ["poisson_run", "shuffled_run"])
def test_both_opacus_accountants_on_the_observed_history(
    run: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    engine, tracker = request.getfixturevalue(run)
    result = tracker.result(DELTA)
    expected = _opacus_accountants(engine.accountant.history)
    assert {f.accountant: f.epsilon for f in result.opacus_figures} == expected
    assert expected["prv"] == result.opacus_epsilon  # the engine's own accountant is prv
    # each comparison states what holds of its figure and the bracket
    for f in result.opacus_figures:
        assert f.epsilon is not None and not f.error
        below = f.epsilon < result.epsilon_lower
        assert ("below the certified lower bound" in f.comparison) == below
        if run == "shuffled_run":
            assert f.comparison.startswith("for Poisson sampling at q=0.1, which did not run")
        elif "agrees with the certified upper bound" in f.comparison:
            assert abs(f.epsilon - result.epsilon) <= 0.02 * result.epsilon
        elif "above the certified upper bound (looser)" in f.comparison:
            assert f.epsilon > result.epsilon
    # rdp converts Renyi bounds to (eps, delta) with a loss: above prv on this history
    assert expected["rdp"] > expected["prv"]
    assert result.opacus_difference.startswith("Opacus's rdp figure is ")
    assert "above its prv figure" in result.opacus_difference
    record = RunRecord.from_json(
        json.loads((tracker.write_run(tmp_path / "run", DELTA) / RECORD_FILE).read_text())
    )
    held = record.params["opacus"]
    assert {f["accountant"]: f["epsilon"] for f in held["accountants"]} == expected
    assert held["difference"] == result.opacus_difference
    assert "Opacus rdp (history)" in result.summary()


def test_the_report_shows_both_figures_beside_the_bracket(
    shuffled_run: tuple[Any, OpacusTracker], tmp_path: Path
) -> None:
    from dpledger.report import render_markdown, report_input
    from dpledger.report.prose import framework_figures

    engine, tracker = shuffled_run
    result = tracker.result(DELTA)
    run = tracker.write_run(tmp_path / "run", DELTA)
    md = render_markdown(report_input(run, backends=["rdp"], brackets=False).report)
    expected = _opacus_accountants(engine.accountant.history)
    figures = framework_figures("Opacus", [f.to_dict() for f in result.opacus_figures], DELTA)
    for f in result.opacus_figures:
        eps = f"{expected[f.accountant]:.6g}"
        assert f"{f.accountant} ε ≈ {eps}: {f.comparison}" in figures
    assert md.index("Certified bracket:") < md.index(figures) < md.index("## DP setting")
    assert "the record holds Opacus's prv and rdp figures" in md
    assert result.opacus_difference in md
    assert "figure was not computed" not in md

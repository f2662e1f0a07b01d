"""Opacus runs verified: planted buggy training scripts are refused or flagged by cause, the
correct ones raise nothing, and accumulated, weighted, distributed and adaptive runs are
accounted against independent computations."""

from __future__ import annotations

import math
import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpledger.integrations.opacus_accumulation import BatchCounter
from dpledger.integrations.opacus_events import (
    POISSON,
    WEIGHTED_DRAWS,
    WEIGHTED_POISSON,
    Step,
    step_sigma,
)
from dpledger.integrations.opacus_samplers import (
    WeightedPoissonSampler,
    draw_inclusion,
    drawn_rate,
)

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ROOT / "tests" / "integrations" / "planted_training"
DELTA = 1e-5
#: Opacus's Poisson samplers at q = 0.1 draw torch.rand(n) < 0.1 in float32: on the grid 2^-24
Q = drawn_rate(0.1)

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*[Ss]ecure RNG turned off"),
    pytest.mark.filterwarnings("ignore:Full backward hook is firing"),
    pytest.mark.filterwarnings("ignore:Optimal order is the"),
    pytest.mark.filterwarnings("ignore:.*Ghost Clipping.*"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """Tiny models: more torch threads than one only wait for a core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _run(name: str, **kwargs: Any) -> Any:
    return runpy.run_path(str(PLANTED / f"{name}.py"), run_name="planted")["main"](**kwargs)


def _distributed(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Rank 0 of a world of two, on one process."""
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a: 2)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda *a: 0)
    return _run("distributed_poisson")


def _flagged(tracker: Any) -> set[str]:
    return {f.cause for f in tracker.findings if f.severity == "flagged"}


def _dp_accounting(event: Event, delta: float, interval: float = 1e-4) -> float:
    """dp-accounting's PLD epsilon (pessimistic estimate) of a self-composed Poisson-Gaussian."""
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    assert isinstance(event, SelfComposedEvent)
    inner = event.event
    assert isinstance(inner, PoissonSampledEvent) and isinstance(inner.event, GaussianEvent)
    dpa = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(
            inner.sampling_probability, dp_accounting.GaussianDpEvent(inner.event.noise_multiplier)
        ),
        event.count,
    )
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    acc.compose(dpa)
    return float(acc.get_epsilon(delta))


# -- planted bugs: flagged or refused by name ------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "cause", "voids"),
    [
        ("private_normaliser", "private_normaliser", True),
        ("sampler_replaced", "sampler_replaced", False),
        ("weighted_rate", "sampling_rate", False),
        ("accumulated_batches", "accumulated_batches", False),
        ("batch_clipping", "clipping_not_applied", True),
        ("ghost_plain_loss", "clipping_not_applied", True),
        ("ghost_clip_mismatch", "clip_norm_mismatch", True),
        ("adaptive_clipping", "adaptive_normaliser", True),
    ],
)
def test_planted_bug_is_flagged_by_name(name: str, cause: str, voids: bool) -> None:
    tracker = _run(name)
    assert cause in _flagged(tracker), [f.line() for f in tracker.findings]
    finding = next(f for f in tracker.findings if f.cause == cause)
    assert finding.voids is voids
    line = finding.line()
    assert line.startswith(f"flagged [{cause}]") and "; fix: " in line and "\n" not in line


def test_distributed_training_without_poisson_sampling_is_refused() -> None:
    with pytest.raises(UnsupportedEventError, match="distributed training without Poisson") as e:
        _run("distributed_without_poisson")
    assert "fix: make_private(..., poisson_sampling=True)" in str(e.value)


def test_a_changed_noise_multiplier_is_noted_and_each_epoch_accounted_at_its_own() -> None:
    tracker = _run("noise_schedule")
    assert not _flagged(tracker)
    noted = {f.cause: f for f in tracker.findings if f.severity == "noted"}
    assert noted["noise_changed"].step == 5  # the first step of the second epoch
    assert "from 2.0 to 1.0" in noted["noise_changed"].message
    assert sorted({s.noise_multiplier for s in tracker.steps}) == [1.0, 2.0]


def test_a_voiding_flag_says_the_bound_does_not_cover_the_run(tmp_path: Path) -> None:
    from dpledger.integrations.opacus import read_result

    tracker = _run("private_normaliser")
    result = tracker.result(DELTA)
    params = read_result(tracker.write_run(tmp_path / "run", DELTA))
    assert params["covered"] is False
    assert params["notes"][0].startswith("NOT COVERED")  # the report prints the notes
    assert any(n.startswith("flagged [private_normaliser]") for n in params["notes"])
    assert not result.covered and result.to_dict()["covered"] is False
    text = result.summary()
    assert "NOT COVERED" in text
    assert "flagged [private_normaliser]" in text and "int(q * len(dataset)) = 1" in text
    assert "noted [secure_rng_off]" in text


# -- the correct scripts raise nothing -----------------------------------------------------------
@pytest.mark.parametrize("name", ["shuffled_run", "weighted_poisson"])
def test_correct_scripts_raise_nothing(name: str) -> None:
    tracker = _run(name)
    assert {f.cause for f in tracker.findings} == {"secure_rng_off"}


def test_distributed_poisson_raises_nothing_and_counts_the_world_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracker = _distributed(monkeypatch)
    assert {f.cause for f in tracker.findings} == {"secure_rng_off"}
    b = tracker.batching
    assert (b.kind, b.world_size, b.dataset_size, b.sample_rate) == (POISSON, 2, 200, Q)
    steps = sum(h[2] for h in tracker.privacy_engine.accountant.history)
    assert len(tracker.steps) == steps == 10  # one Poisson step per noisy step, not 2 x 10
    assert tracker.event() == SelfComposedEvent(PoissonSampledEvent(Q, GaussianEvent(1.0)), 10)


def test_memory_manager_counts_noisy_steps_not_physical_batches() -> None:
    tracker, physical = _run("memory_manager")
    assert {f.cause for f in tracker.findings} == {"secure_rng_off"}
    history = tracker.privacy_engine.accountant.history
    assert len(tracker.steps) == sum(h[2] for h in history) == 10
    assert physical > 2 * len(tracker.steps)  # batches of ~20 split into at most 5
    assert all(s.batches == 1 for s in tracker.steps)
    assert tracker.event() == SelfComposedEvent(PoissonSampledEvent(Q, GaussianEvent(1.0)), 10)


@pytest.mark.slow
def test_memory_manager_numbers_agree_with_dp_accounting() -> None:
    tracker, _ = _run("memory_manager")
    result = tracker.result(DELTA)
    reference = _dp_accounting(tracker.event(), DELTA)
    assert result.epsilon_lower <= reference * (1 + 1e-3)
    assert abs(result.epsilon - reference) <= 0.01 * reference


# -- accounted numbers ---------------------------------------------------------------------------
def test_accumulated_batches_are_accounted_as_the_noise_split_between_them() -> None:
    tracker = _run("accumulated_batches")
    assert [s.batches for s in tracker.steps] == [4, 4]
    # Opacus's accountant booked two steps at q = 0.1: a quarter of what ran
    assert sum(h[2] for h in tracker.privacy_engine.accountant.history) == 2
    sigma = math.nextafter(1.0 / 2.0, 0.0)
    assert tracker.event() == SelfComposedEvent(PoissonSampledEvent(Q, GaussianEvent(sigma)), 8)


@pytest.mark.slow
def test_accumulated_batches_numbers_agree_with_dp_accounting() -> None:
    tracker = _run("accumulated_batches")
    result = tracker.result(DELTA)
    assert result.epsilon_lower == 0.0  # the split is an upper bound only
    reference = _dp_accounting(tracker.event(), DELTA)
    assert abs(result.epsilon - reference) <= 0.01 * reference
    assert result.opacus_epsilon is not None and result.opacus_epsilon < result.epsilon / 4


def test_adaptive_clipping_accounts_the_count_release() -> None:
    tracker = _run("adaptive_clipping")
    sigma, count = 1.0, 2.0
    effective = (sigma**-2 - (2 * count) ** -2) ** -0.5
    step = tracker.steps[0]
    assert step.effective_noise == pytest.approx(effective, rel=1e-12)
    assert step.count_noise == count
    combined = (effective**-2 + count**-2) ** -0.5  # = (1 - 1/16 + 1/4) ** -0.5
    assert step_sigma(step) == pytest.approx((1 + 3 / 16) ** -0.5, rel=1e-12)
    assert step_sigma(step) <= combined
    assert tracker.event() == SelfComposedEvent(
        PoissonSampledEvent(Q, GaussianEvent(step_sigma(step))), 3
    )
    assert "adaptive_count" in {f.cause for f in tracker.findings}
    assert len({s.max_grad_norm for s in tracker.steps}) > 1  # the norm adapts: not flagged
    assert "clip_norm_changed" not in {f.cause for f in tracker.findings}


def test_weighted_draws_rates_and_their_dominating_event() -> None:
    tracker = _run("weighted_rate")
    b = tracker.batching
    assert b.kind == WEIGHTED_DRAWS and b.batch_size == 32
    p_max = 1 / 80  # a minority weight over the total weight 2
    assert b.draw_rate == pytest.approx(p_max, rel=1e-6)
    assert b.inclusion_rate == pytest.approx(1 - (1 - p_max) ** 32, rel=1e-6)
    finding = next(f for f in tracker.findings if f.cause == "sampling_rate")
    assert "q = 1/len(data_loader) = 0.1" in finding.message
    sigma = math.nextafter(1.0 / (2 * math.sqrt(32)), 0.0)
    assert tracker.event() == SelfComposedEvent(
        PoissonSampledEvent(b.draw_rate, GaussianEvent(sigma)), 32 * len(tracker.steps)
    )


@given(
    p=st.floats(min_value=1e-12, max_value=1.0),
    draws=st.integers(min_value=1, max_value=10_000),
)
@settings(max_examples=200, deadline=None)
def test_inclusion_is_never_below_the_exact_probability(p: float, draws: int) -> None:
    from fractions import Fraction

    exact = 1 - (1 - Fraction(p)) ** draws
    value = draw_inclusion(p, draws)
    assert Fraction(value) >= exact and value <= 1.0
    assert value <= min(1.0, draws * p * (1 + 1e-9))  # the union bound


def test_batch_counter_counts_logical_batches_and_drops_an_interrupted_pass() -> None:
    class Batches:
        def __iter__(self) -> Iterator[list[int]]:
            yield from ([0], [1], [2])

    busy = {"value": False}
    sampler = Batches()
    counter = BatchCounter(sampler, in_progress=lambda: busy["value"])
    counter.install()
    assert isinstance(sampler, Batches) and type(sampler).__name__ == "Batches"
    it = iter(sampler)
    next(it), next(it)
    assert counter.take(accumulated=1) == (2, 1)  # two batches under one noisy step
    next(iter(sampler))  # a new pass: the third batch of the first was never drawn
    assert counter.passes == 2 and counter.take(accumulated=1) == (1, 2)
    it = iter(sampler)
    next(it)  # drawn, then the loop breaks without a backward pass
    next(iter(sampler))
    assert counter.take(accumulated=1) == (1, 4)  # the unused batch is not counted
    busy["value"] = True  # gradients pending: the batch is accumulated across the passes
    next(iter(sampler))
    next(iter(sampler))
    assert counter.take(accumulated=1) == (2, 5)
    counter.remove()
    assert type(sampler) is Batches
    prefetched = BatchCounter(Batches(), workers=2)
    assert prefetched.take(accumulated=3) == (3, None)  # the optimizer's count


def test_opacus_poisson_rates_are_those_of_float32_draws() -> None:
    assert Q == 1677722 / 2**24 and 0 < Q - 0.1 < 2**-24
    assert drawn_rate(0.5) == 0.5 and drawn_rate(1.0) == 1.0
    x = torch.rand(200_000, generator=torch.Generator().manual_seed(0)).double() * 2**24
    assert bool((x == x.round()).all())  # the grid the rounding assumes


def test_inclusion_of_independent_draws_is_rounded_up() -> None:
    from fractions import Fraction

    for p, draws in [(1e-5, 16), (1 / 80, 32), (0.5, 3), (1.0, 2), (1e-9, 1000)]:
        exact = 1 - (1 - Fraction(p)) ** draws
        value = Fraction(draw_inclusion(p, draws))
        assert exact <= value <= exact * (1 + Fraction(2, 10**12))


def test_weighted_poisson_sampler_draws_each_record_at_its_rate() -> None:
    rates = [0.0] * 50 + [1.0] * 50
    sampler = WeightedPoissonSampler(rates, 3, generator=torch.Generator().manual_seed(0))
    assert [sorted(b) for b in sampler] == [list(range(50, 100))] * 3
    assert len(sampler) == 3 and sampler.max_rate == 1.0
    with pytest.raises(InvalidParameterError, match="rates"):
        WeightedPoissonSampler([1.5], 3)
    with pytest.raises(InvalidParameterError, match="max_rate"):
        WeightedPoissonSampler([0.5], 3, max_rate=0.1)


@pytest.mark.slow
def test_weighted_poisson_is_poisson_gaussian_at_the_largest_rate() -> None:
    tracker = _run("weighted_poisson")
    assert tracker.batching.kind == WEIGHTED_POISSON
    event = SelfComposedEvent(PoissonSampledEvent(0.2, GaussianEvent(1.0)), 10)
    assert tracker.event() == event
    result = tracker.result(DELTA)
    reference = _dp_accounting(event, DELTA)
    assert abs(result.epsilon - reference) <= 0.01 * reference
    assert result.epsilon_lower <= reference * (1 + 1e-3)


@pytest.mark.slow
def test_weighted_draws_bound_agrees_with_dp_accounting() -> None:
    tracker = _run("weighted_rate")
    result = tracker.result(DELTA)
    reference = _dp_accounting(result.event, DELTA, interval=1e-2)
    assert abs(result.epsilon - reference) <= 0.02 * reference
    assert result.opacus_epsilon is not None and result.opacus_epsilon < result.epsilon


@pytest.mark.slow
def test_distributed_poisson_numbers_agree_with_dp_accounting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tracker = _distributed(monkeypatch)
    result = tracker.result(DELTA)
    reference = _dp_accounting(tracker.event(), DELTA)
    assert abs(result.epsilon - reference) <= 0.01 * reference


# -- bad input: one line naming the fix ----------------------------------------------------------
def _manual_optimizer(model: Any) -> Any:
    from opacus.optimizers import DPOptimizer

    return DPOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        expected_batch_size=8,
    )


def test_bad_input_is_one_line_naming_the_fix() -> None:
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    model = torch.nn.Linear(4, 2)
    loader = DataLoader(TensorDataset(torch.zeros(16, 4), torch.zeros(16).long()), batch_size=8)
    engine = PrivacyEngine()
    from dpledger.integrations.opacus import OpacusTracker

    cases = [
        ({"optimizer": torch.optim.SGD(model.parameters(), lr=0.1)}, "DPOptimizer"),
        ({"module": model}, "per-sample gradients"),
        ({"public_normaliser": 5}, "public_normaliser"),
    ]
    for kwargs, match in cases:
        optimizer = kwargs.pop("optimizer", None) or _manual_optimizer(model)
        with pytest.raises((InvalidParameterError, UnsupportedEventError), match=match) as e:
            OpacusTracker.attach(engine, optimizer, loader, **kwargs)
        assert "\n" not in str(e.value) and ("pass" in str(e.value) or "set" in str(e.value))


def test_steps_with_adaptive_noise_carry_it_in_their_public_record() -> None:
    step = Step(1.0, 1.0, 0, effective_noise=1.1, count_noise=2.0)
    assert step.to_dict()["count_noise"] == 2.0
    assert "count_noise" not in Step(1.0, 1.0, 0).to_dict()
    assert (
        account(
            SelfComposedEvent(PoissonSampledEvent(Q, GaussianEvent(step_sigma(step))), 1),
            Adjacency(),
            delta=DELTA,
        ).bound.epsilon
        > account(
            SelfComposedEvent(PoissonSampledEvent(Q, GaussianEvent(1.0)), 1),
            Adjacency(),
            delta=DELTA,
        ).bound.epsilon
    )


# -- two real ranks ------------------------------------------------------------------------------
def _two_ranks(tmp_path: Path, scenario: str) -> list[dict[str, Any]]:
    import json
    import subprocess
    import sys

    script = PLANTED / "distributed_ddp.py"
    store = tmp_path / "store"
    code = (
        "import runpy, sys; sys.path.insert(0, sys.argv[1]); "
        "runpy.run_path(sys.argv[2])['main'](int(sys.argv[3]), 2, sys.argv[4], sys.argv[5], "
        "sys.argv[6])"
    )
    outs = [tmp_path / f"rank{r}.json" for r in range(2)]
    args = [sys.executable, "-c", code, str(ROOT), str(script)]
    procs = [
        subprocess.Popen(
            [*args, str(r), str(store), scenario, str(outs[r])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
    return [json.loads(o.read_text()) for o in outs]


@pytest.mark.slow
def test_two_ranks_with_distributed_poisson_sampling_count_each_step_once(tmp_path: Path) -> None:
    ranks = _two_ranks(tmp_path, "poisson")
    event = SelfComposedEvent(PoissonSampledEvent(Q, GaussianEvent(1.0)), 10).to_dict()
    for seen in ranks:
        assert seen["optimizer"] == "DistributedDPOptimizer"
        assert seen["batching"] == ["poisson", 2, 200, Q]
        assert seen["steps"] == seen["opacus_steps"] == 10
        assert seen["event"] == event
        assert seen["findings"] == ["secure_rng_off"]


@pytest.mark.slow
def test_two_ranks_without_poisson_sampling_are_refused(tmp_path: Path) -> None:
    for seen in _two_ranks(tmp_path, "shuffled"):
        assert "distributed training without Poisson sampling" in seen["refused"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("memory_manager", "| [2.846, 2.855] | 2.865 |"),
        ("weighted_poisson", "| [4.973, 4.985] | 4.995 |"),
        ("adaptive_clipping", "| [2.502, 2.506] (multiplier 0.9177) | 2.097 |"),
        ("accumulated_batches", "| ε ≤ 11.43 (no lower bound) | 1.928 (books 2 batches) |"),
        ("weighted_rate", "| ε ≤ 905 (no lower bound) | 2.865 (books q = 0.1;"),
    ],
)
def test_numbers_in_the_docs(name: str, row: str) -> None:
    """The docs' table: upper bounds rounded up, lower bounds down, Opacus's figure rounded."""
    import re

    doc = (ROOT / "docs" / "opacus.md").read_text()
    assert row in doc
    out = _run(name)
    result = (out[0] if isinstance(out, tuple) else out).result(DELTA)
    numbers = [float(x) for x in re.findall(r"\d+\.?\d*", row.split("|")[1])]
    upper = numbers[1] if row.count("[") else numbers[0]
    assert result.epsilon <= upper <= result.epsilon * 1.001 + 0.001
    if row.count("["):
        assert result.epsilon_lower - 0.001 <= numbers[0] <= result.epsilon_lower
    opacus_figure = float(re.findall(r"\d+\.\d+", row.split("|")[2])[0])
    assert result.opacus_epsilon is not None
    assert abs(result.opacus_epsilon - opacus_figure) <= 0.0006

"""An Opacus run booked at attach time: the plan booked as the tracker accounts it (gradient
accumulation, plain, distributed and weighted Poisson), every noisy step's accounted batches
compared with the booking before the optimizer applies it, a plan that does not fit refused at
attach."""

from __future__ import annotations

import math
import runpy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.budget import rules, store
from dpledger.budget.status import status
from dpledger.core.errors import LedgerViolationError
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.integrations.opacus import OpacusTracker
from dpledger.integrations.opacus_budget import OpacusBudget
from dpledger.integrations.opacus_events import POISSON, WEIGHTED_POISSON, Batching, Step

torch = pytest.importorskip("torch")
pytest.importorskip("opacus")

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*[Ss]ecure RNG turned off"),
    pytest.mark.filterwarnings("ignore:Full backward hook is firing"),
    pytest.mark.filterwarnings("ignore:Optimal order is the"),
]
N, B, SIGMA = 200, 20, 1.0
PLANTED = Path(__file__).parent / "planted" / "accumulating_run.py"
POISSON_10 = Batching(POISSON, 200, 10, sample_rate=0.1)


def _tracker(batching: Batching, sigma: float = 1.0) -> Any:
    """What the budget reads of a tracker: its batching and the optimizer's multiplier."""
    return SimpleNamespace(batching=batching, optimizer=SimpleNamespace(noise_multiplier=sigma))


def _booked(batching: Batching, steps: int, accumulation: int = 1) -> OpacusBudget:
    budget = OpacusBudget("unused.db", "digits", steps=steps, accumulation=accumulation)
    ((part, count),) = _parts(budget.planned_event(_tracker(batching)))
    budget.booked = (part, count)
    return budget


def _parts(event: Any) -> list[tuple[tuple[float, float], int]]:
    assert isinstance(event, SelfComposedEvent)
    inner = event.event
    return [((inner.sampling_probability, inner.event.noise_multiplier), event.count)]


def _noisy(batches: int, sigma: float = 1.0) -> Step:
    return Step(noise_multiplier=sigma, max_grad_norm=1.0, epoch=0, batches=batches)


@pytest.mark.parametrize(
    "batching",
    [
        POISSON_10,
        Batching(POISSON, 200, 10, sample_rate=0.1, world_size=4),  # distributed Poisson
        Batching(WEIGHTED_POISSON, 200, 5, sample_rate=0.2),  # its largest rate
    ],
)
def test_the_plan_is_booked_as_the_tracker_accounts_accumulation(batching: Batching) -> None:
    budget = OpacusBudget("unused.db", "digits", steps=3, accumulation=4)
    split = math.nextafter(SIGMA / 2.0, 0.0)  # sigma / sqrt(4), rounded down
    q = batching.sample_rate
    assert budget.planned_event(_tracker(batching)) == SelfComposedEvent(
        PoissonSampledEvent(q, GaussianEvent(split)), 12
    )
    single = OpacusBudget("unused.db", "digits", steps=3)
    assert single.planned_event(_tracker(batching)) == SelfComposedEvent(
        PoissonSampledEvent(q, GaussianEvent(SIGMA)), 3
    )


def test_a_step_accumulating_more_than_booked_is_refused_at_that_step() -> None:
    budget = _booked(POISSON_10, steps=3)  # the naive count: one batch per noisy step
    budget.admit(POISSON_10, _noisy(1))
    with pytest.raises(LedgerViolationError, match=r"noisy step 2 \(2 logical batches\) accounts"):
        budget.admit(POISSON_10, _noisy(2))
    assert budget.accounted == {(0.1, SIGMA): 1}


def test_a_run_within_its_accumulating_plan_passes_and_the_step_beyond_is_refused() -> None:
    budget = _booked(POISSON_10, steps=3, accumulation=2)
    for _ in range(3):
        budget.admit(POISSON_10, _noisy(2))
    with pytest.raises(LedgerViolationError, match="to 8, beyond the 6 booked"):
        budget.admit(POISSON_10, _noisy(2))


@settings(max_examples=60, deadline=None)
@given(
    planned=st.integers(1, 4),
    steps=st.integers(1, 5),
    schedule=st.lists(st.tuples(st.integers(1, 5), st.sampled_from([0.5, 1.0, 2.0])), max_size=8),
)
def test_the_admitted_steps_are_dominated_by_the_booked_plan(
    planned: int, steps: int, schedule: list[tuple[int, float]]
) -> None:
    """Whatever is admitted is a prefix of the booked composition, post-processed: each
    accounted batch at a multiplier no smaller than booked, no more batches than booked."""
    budget = _booked(POISSON_10, steps=steps, accumulation=planned)
    ((rate, sigma), count) = budget.booked or ((0.0, 0.0), 0)
    for k, s in schedule:
        try:
            budget.admit(POISSON_10, _noisy(k, s))
        except LedgerViolationError:
            split = s if k == 1 else math.nextafter(s / math.sqrt(k), 0.0)
            assert split < sigma or sum(budget.accounted.values()) + k > count
            break
    assert sum(budget.accounted.values()) <= count
    assert all(q <= rate and s >= sigma for q, s in budget.accounted)


def test_planted_accumulation_is_refused_at_the_first_over_spending_step(
    sqlite_store: str,
) -> None:
    """Booked for 4 noisy steps of one batch, the script sums two batches per step from its
    third step on: the third step is refused before it changes the parameters."""
    store.declare(sqlite_store, "digits", epsilon=8.0, delta=1e-5, rule="renyi")
    budget = OpacusBudget(sqlite_store, "digits", steps=4)
    seen: dict[str, list[Any]] = {}
    main = runpy.run_path(str(PLANTED), run_name="planted")["main"]
    with pytest.raises(LedgerViolationError, match=r"noisy step 3 \(2 logical batches\)") as e:
        main(budget, [1, 1, 2, 2], seen)
    assert "multiplier 0.707107" in str(e.value)  # 1 / sqrt(2) per batch, below the booked 1
    assert budget.booked is not None and budget.accounted == {(budget.booked[0][0], SIGMA): 2}
    before, now = seen["before"], seen["now"]
    assert len(before) == 3
    assert all(torch.equal(a, b) for a, b in zip(before[2], now, strict=True))  # not applied
    assert not any(torch.equal(a, b) for a, b in zip(before[0], now, strict=True))  # 2 were
    (entry,) = status(sqlite_store)["budgets"][0]["runs"]
    assert entry["parameters"] == {"integration": "opacus", "steps": 4, "accumulation": 1}


def _private() -> tuple[Any, Any, Any, Any]:
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(N, 4), torch.randint(0, 2, (N,)))
    engine = PrivacyEngine(accountant="rdp")
    model = torch.nn.Linear(4, 2)
    model, optimizer, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=DataLoader(data, batch_size=B),
        noise_multiplier=SIGMA,
        max_grad_norm=1.0,
    )
    optimizer.expected_batch_size = B  # a public normaliser (attach with public_normaliser=B)
    return engine, model, optimizer, loader


def _step(model: Any, optimizer: Any, xb: Any, yb: Any) -> None:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(xb), yb).backward()
    optimizer.step()


@pytest.mark.slow  # trains a few steps
def test_the_planned_run_is_booked_and_a_step_beyond_it_refused(sqlite_store: str) -> None:
    store.declare(sqlite_store, "digits", epsilon=8.0, delta=1e-5, rule="renyi")
    engine, model, optimizer, loader = _private()
    budget = OpacusBudget(sqlite_store, "digits", steps=3)
    OpacusTracker.attach(engine, optimizer, loader, budget=budget, public_normaliser=B)
    (entry,) = status(sqlite_store)["budgets"][0]["runs"]
    assert entry["parameters"] == {"integration": "opacus", "steps": 3, "accumulation": 1}
    batches = iter(loader)
    for _ in range(3):
        _step(model, optimizer, *next(batches))
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(LedgerViolationError, match="beyond the 3 booked"):
        _step(model, optimizer, *next(batches))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.slow  # torch and Opacus
def test_a_plan_that_does_not_fit_is_refused_before_training(sqlite_store: str) -> None:
    store.declare(sqlite_store, "digits", epsilon=0.1, delta=1e-5, rule="renyi")
    engine, _, optimizer, loader = _private()
    with pytest.raises(rules.BudgetRefused):
        OpacusTracker.attach(
            engine,
            optimizer,
            loader,
            budget=OpacusBudget(sqlite_store, "digits", steps=1000),
            public_normaliser=B,
        )
    assert status(sqlite_store)["budgets"][0]["bookings"] == 0


@pytest.mark.slow  # torch and Opacus
def test_a_rate_raised_after_attach_is_refused_at_the_step(sqlite_store: str) -> None:
    """The loader's sampling rate raised after the booking (an ordinary mistake): the tracker
    flags it at the step, and the guard refuses that step before the parameters change (the
    store would otherwise hold the booked rate's spend for a run that spent more)."""
    store.declare(sqlite_store, "digits", epsilon=8.0, delta=1e-5, rule="renyi")
    engine, model, optimizer, loader = _private()
    budget = OpacusBudget(sqlite_store, "digits", steps=3)
    OpacusTracker.attach(engine, optimizer, loader, budget=budget, public_normaliser=B)
    loader.batch_sampler.sample_rate = 0.9
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(LedgerViolationError, match="sampler_changed"):
        _step(model, optimizer, *next(iter(loader)))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.slow  # torch and Opacus
def test_a_departure_found_at_attach_books_nothing(sqlite_store: str) -> None:
    """A normaliser derived from the private dataset size voids the bound: nothing is booked."""
    store.declare(sqlite_store, "digits", epsilon=8.0, delta=1e-5, rule="renyi")
    engine, _, optimizer, loader = _private()
    optimizer.expected_batch_size = int(loader.sample_rate * N)  # what make_private derives
    with pytest.raises(LedgerViolationError, match="private_normaliser"):
        OpacusTracker.attach(
            engine, optimizer, loader, budget=OpacusBudget(sqlite_store, "digits", steps=3)
        )
    assert status(sqlite_store)["budgets"][0]["bookings"] == 0

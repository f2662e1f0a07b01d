"""An Opacus run booked at attach time: the planned steps booked before the first step, a
step beyond them refused before the optimizer applies it, a plan that does not fit refused at
attach."""

from __future__ import annotations

from typing import Any

import pytest

from dpledger.budget import rules, store
from dpledger.budget.status import status
from dpledger.core.errors import LedgerViolationError
from dpledger.integrations.opacus import OpacusTracker
from dpledger.integrations.opacus_budget import OpacusBudget

torch = pytest.importorskip("torch")
pytest.importorskip("opacus")

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*[Ss]ecure RNG turned off"),
    pytest.mark.filterwarnings("ignore:Full backward hook is firing"),
    pytest.mark.filterwarnings("ignore:Optimal order is the"),
]
N, B, SIGMA = 200, 20, 1.0


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
    OpacusTracker.attach(engine, optimizer, loader, budget=budget)
    (entry,) = status(sqlite_store)["budgets"][0]["runs"]
    assert entry["parameters"] == {"integration": "opacus", "steps": 3}
    batches = iter(loader)
    for _ in range(3):
        _step(model, optimizer, *next(batches))
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(LedgerViolationError, match="booked for 3 steps"):
        _step(model, optimizer, *next(batches))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.slow  # torch and Opacus
def test_a_plan_that_does_not_fit_is_refused_before_training(sqlite_store: str) -> None:
    store.declare(sqlite_store, "digits", epsilon=0.1, delta=1e-5, rule="renyi")
    engine, _, optimizer, loader = _private()
    with pytest.raises(rules.BudgetRefused):
        OpacusTracker.attach(
            engine, optimizer, loader, budget=OpacusBudget(sqlite_store, "digits", steps=1000)
        )
    assert status(sqlite_store)["budgets"][0]["bookings"] == 0

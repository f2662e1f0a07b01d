"""The PLD bracket table of docs/accountants.md is what the PLD backend certifies."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.select import account
from dpledger.core.adjacency import ROW_ADD_REMOVE, ROW_REPLACE_ONE
from dpledger.core.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent

DOC = Path(__file__).resolve().parents[2] / "docs" / "accountants.md"


def _dp_sgd(sigma: float, q: float, steps: int) -> Event:
    return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)


#: row label -> (event, delta, heavy)
ROWS: dict[str, tuple[Event, float, bool]] = {
    "| q = 1e-4, 1e5 steps, δ = 1e-10 |": (_dp_sgd(1.0, 1e-4, 100_000), 1e-10, True),
    "| σ = 0.8, q = 1e-4, 1e5 steps, δ = 1e-10 |": (_dp_sgd(0.8, 1e-4, 100_000), 1e-10, True),
    "| q = 0.01, 1000 steps, δ = 1e-15 |": (_dp_sgd(1.0, 0.01, 1000), 1e-15, False),
    "| q = 1e-4, 100 steps, δ = 1e-15 |": (_dp_sgd(1.0, 1e-4, 100), 1e-15, False),
    "| q = 1e-4, 1e4 steps, δ = 1e-15 |": (_dp_sgd(1.0, 1e-4, 10_000), 1e-15, False),
    "| q = 1e-4, 1e7 steps, δ = 1e-5 |": (_dp_sgd(1.0, 1e-4, 10_000_000), 1e-5, True),
    "| q = 1e-3, one step, δ = 1e-5 (σ = 0.5) |": (_dp_sgd(0.5, 1e-3, 1), 1e-5, False),
}


def _bracket(prefix: str) -> tuple[str, str]:
    line = next(x for x in DOC.read_text().splitlines() if x.startswith(prefix))
    lower, upper = line[len(prefix) :].strip(" |[]").split(",")
    return lower.strip(), upper.strip()


def _check(prefix: str) -> None:
    event, delta, _ = ROWS[prefix]
    acc = PLDAccountant()
    acc.compose(event)
    bound = acc.get_epsilon(delta)
    lower, upper = _bracket(prefix)
    digits = len(lower.split(".")[1])
    assert f"{bound.epsilon_lower:.{digits}f}" == lower
    assert f"{bound.epsilon:.{digits}f}" == upper


@pytest.mark.parametrize("prefix", [p for p, (_, _, heavy) in ROWS.items() if not heavy])
def test_light_rows(prefix: str) -> None:
    _check(prefix)


@pytest.mark.slow
@pytest.mark.parametrize("prefix", [p for p, (_, _, heavy) in ROWS.items() if heavy])
def test_heavy_rows(prefix: str) -> None:
    _check(prefix)


#: the large-loss table (sigma = 0.02, q = 0.1, delta = 1e-5): row label -> (adjacency, steps)
LARGE_LOSS_ROWS = {
    "| add/remove, one step |": (ROW_ADD_REMOVE, 1),
    "| replace-one, one step |": (ROW_REPLACE_ONE, 1),
    "| add/remove, 10 steps |": (ROW_ADD_REMOVE, 10),
}


@pytest.mark.parametrize("prefix", list(LARGE_LOSS_ROWS))
def test_large_loss_rows(prefix: str) -> None:
    adjacency, steps = LARGE_LOSS_ROWS[prefix]
    line = next(x for x in DOC.read_text().splitlines() if x.startswith(prefix))
    lower, upper = line[len(prefix) :].split("|")[0].strip(" []").split(",")
    lower, upper = lower.strip(), upper.strip()
    acc = PLDAccountant(adjacency)
    acc.compose(_dp_sgd(0.02, 0.1, steps))
    bound = acc.get_epsilon(1e-5)
    digits = len(lower.split(".")[1])
    assert f"{bound.epsilon_lower:.{digits}f}" == lower
    assert f"{bound.epsilon:.{digits}f}" == upper


def test_bounded_range_example() -> None:
    """The curve-of-each-mechanism section: 1000 exponential mechanisms at 0.1, delta 1e-5."""
    import re

    from dpledger.core.events import ExponentialMechanismEvent, PureDPEvent

    text = " ".join(DOC.read_text().split())
    found = re.search(
        r"\[(\d+\.\d+), (\d+\.\d+)\] at δ = 1e-5, where randomized response at ε gives (\d+\.\d+)",
        text,
    )
    assert found is not None
    lower, upper, plain = found.groups()
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(ExponentialMechanismEvent(0.1), 1000))
    bound = acc.get_epsilon(1e-5)
    assert (f"{bound.epsilon_lower:.3f}", f"{bound.epsilon:.3f}") == (lower, upper)
    rr = PLDAccountant()
    rr.compose(SelfComposedEvent(PureDPEvent(0.1), 1000))
    assert f"{rr.get_epsilon(1e-5).epsilon:.3f}" == plain
    found = re.search(
        r"RDP certifies (\d+\.\d+) for the same example.*?Rényi curve gives (\d+\.\d+)", text
    )
    assert found is not None
    rdp, rdp_plain = found.groups()
    em = SelfComposedEvent(ExponentialMechanismEvent(0.1), 1000)
    assert f"{RDPAccountant().compose(em).get_epsilon(1e-5).epsilon:.3f}" == rdp
    plain_rdp = RDPAccountant().compose(SelfComposedEvent(PureDPEvent(0.1), 1000))
    assert f"{plain_rdp.get_epsilon(1e-5).epsilon:.3f}" == rdp_plain
    found = re.search(r"The default call's headline is the closed form's .*?: (\d+\.\d+)\.", text)
    assert found is not None
    headline = account(em, delta=1e-5).bound  # the adaptive programme's, below RDP's
    assert (headline.method, f"{headline.epsilon:.3f}") == ("closed_form", found.group(1))
    assert headline.epsilon < float(rdp)

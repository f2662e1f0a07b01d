"""Work a query does once: the PLD components a tail cut leaves unchanged keep their coarse
discretisations, cuts at other budgets read the curves once, and untilted window widths
are computed only when read (accountant/pld_prepared.py); cells of representatives are
folded in arrays as they are member by member (accountant/representatives.py); the support
check of an event that ``select.account`` runs before composing it is not run again by the
compose (``Accountant._checked_reason`` in accountant/base.py)."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_discrete import DiscretePLD, discretise
from dpledger.accountant.pld_prepared import (
    TAIL_MASS,
    ByCurve,
    Prepared,
    _cut_profile,
    _discretised,
    cut_tails,
)
from dpledger.accountant.pld_tilt import tilted_window
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.representatives import Table, _fold, _fold_exact
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)


def _mixed() -> Event:
    """Poisson-sampled Gaussians (long thin tails, cut) beside Laplace counts (pure: uncut)."""
    sampled = [PoissonSampledEvent(0.01 * (1 + i * 0.04), GaussianEvent(1.0)) for i in range(20)]
    return ComposedEvent([*sampled, *(LaplaceEvent(10.0 + i) for i in range(4))])


def _prepared(event: Event) -> Prepared:
    acc = PLDAccountant()
    acc.compose(event)
    prep = acc._prepared()
    assert prep is not None
    return prep


def test_a_cut_reuses_the_discretisations_of_the_curves_it_leaves():
    prep = _prepared(_mixed())
    cut = cut_tails(prep, 1e-8)
    assert cut is not None and cut.h0 == prep.h0
    reused = fresh = 0
    for name in prep.names:
        pairs = zip(prep.comps, cut.comps, prep.coarse[name], cut.coarse[name], strict=True)
        for (whole, _), (part, _), (old, _), (new, _) in pairs:
            same = getattr(part, name) is getattr(whole, name)
            assert (new is old) == same
            reused, fresh = reused + same, fresh + (not same)
            # reused or not, the discretisation is the one the curve gives on the grid
            made = discretise(getattr(part, name), cut.h0)
            assert (new.offset, new.inf_mass, new.h) == (made.offset, made.inf_mass, made.h)
            assert np.array_equal(new.masses, made.masses)
    assert reused > 0 and fresh > 0
    # the untilted window widths are computed when first read, from the coarse grid
    assert not cut.width0
    for name in cut.names:
        a, b = tilted_window(cut.coarse[name], 0.0, TAIL_MASS)
        assert cut.width0[name] == max(b - a, 1e-9)
    assert set(cut.width0) == set(cut.names)


class _Counting(PLDAccountant):
    """The PLD accountant, counting its support checks by event."""

    def __init__(self, adjacency: Adjacency | None = None) -> None:
        super().__init__(adjacency)
        self.checks: list[Event] = []

    def _unsupported_reason(self, event: Event) -> str | None:
        self.checks.append(event)
        return super()._unsupported_reason(event)


def test_a_checked_event_is_composed_without_a_second_check(monkeypatch: pytest.MonkeyPatch):
    made: list[_Counting] = []

    def factories(names=None):  # type: ignore[no-untyped-def]
        def factory(adjacency: Adjacency) -> _Counting:
            made.append(_Counting(adjacency))
            return made[-1]

        return [("pld", factory, "")]

    monkeypatch.setattr(select, "backend_factories", factories)
    event = _mixed()
    bound = select.account(event, delta=1e-5).bound
    reference = select.account(event, delta=1e-5, backends=["pld"]).bound
    assert (bound.epsilon_lower, bound.epsilon) == (reference.epsilon_lower, reference.epsilon)
    assert len(made) == 2 and all(len(acc.checks) == 1 for acc in made)


def test_the_check_is_run_again_when_the_ledger_or_the_event_changed():
    acc = _Counting()
    event = _mixed()
    assert acc._checked_reason(event) is None
    acc._compose_canonical(event, 1)
    assert len(acc.checks) == 1
    acc.compose(event)  # the ledger now holds it: checked again (the extent may differ)
    assert len(acc.checks) == 2
    other = ComposedEvent([GaussianEvent(1.0)])
    acc._checked_reason(other)
    acc._checked_reason(other)
    assert acc.checks[2:] == [other]
    acc.adjacency = Adjacency(relation="replace_one")
    acc._checked_reason(other)
    assert len(acc.checks) == 4


def test_an_unsupported_event_is_refused_by_compose_after_the_check():
    acc = RDPAccountant()
    event = ComposedEvent([GaussianEvent(1.0), PoissonSampledEvent(0.5, LaplaceEvent(1.0))])
    reason = acc._checked_reason(event)
    if reason is None:
        pytest.skip("RDP characterises this event")
    with pytest.raises(Exception, match="cannot handle"):
        acc._compose_canonical(event, 1)
    assert acc.ledger == ()


@pytest.mark.parametrize("step", [1e-3, 0.05, 1.0])
def test_folded_cells_are_those_member_by_member(step: float):
    rng = np.random.default_rng(3)
    # repeated parameters (ties), two-parameter shapes and a zero parameter among them
    rates = rng.choice(np.geomspace(1e-4, 1e-2, 40), 600)
    noises = rng.choice(np.linspace(0.8, 1.2, 30), 600)
    leaves: dict[Event, int] = {}
    for i, (q, s) in enumerate(zip(rates.tolist(), noises.tolist(), strict=True)):
        leaves[PoissonSampledEvent(q, GaussianEvent(s))] = 1 + i % 3
    for e in rng.uniform(0.01, 0.5, 300).tolist():
        leaves[ApproxDPEvent(e, float(rng.choice([0.0, 1e-9, 1e-7])))] = 2
    table = Table(leaves)
    assert len(table.rows) == 2
    for shape, members in table.rows.items():
        index = table.cells(shape, step)
        for up in (True, False):
            folded = _fold(index, members, table.magnitudes[shape], up=up)
            assert folded == _fold_exact(index, members, up=up)
            assert all(type(v) is float for row, _ in folded for v in row)


def test_cuts_at_other_budgets_read_each_curve_once():
    prep = _prepared(_mixed())
    first = cut_tails(prep, 1e-8)
    assert first is not None and len(prep.readings)
    profiles = [getattr(d, name) for d, _ in prep.comps for name in ("remove", "add")]
    read = [prep.readings.find(p) for p in profiles]
    second = cut_tails(prep, 1e-12)
    again = [prep.readings.find(p) for p in profiles]
    assert second is not None and all(a is b for a, b in zip(again, read, strict=True))
    total = sum(k for _, k in prep.comps)
    for (whole, _), (part, _) in zip(prep.comps, second.comps, strict=True):
        for name in ("remove", "add", "lower_remove", "lower_add"):
            made = _cut_profile(getattr(whole, name), 1e-12 / total)
            assert getattr(part, name).loss_hi == made.loss_hi


def test_a_count_is_checked_as_the_self_composition_it_spells():
    """``compose(event, count)`` and ``compose(SelfComposedEvent(event, count))`` meet the same
    limits: a count beyond the PLD grid's precision is refused either way, nothing added."""
    event = PoissonSampledEvent(0.01, GaussianEvent(2.0))
    acc = PLDAccountant()
    for made in (
        lambda: acc.compose(event, 10**13),
        lambda: acc.compose(SelfComposedEvent(event, 10**13)),
    ):
        with pytest.raises(UnsupportedEventError, match="1e\\+13 compositions"):
            made()
    assert acc._ledger == []
    assert acc.compose(event, 1000).get_epsilon(1e-5).epsilon < 1


def test_kept_values_are_found_for_their_own_curve_only():
    """A value kept for a curve is not found for another curve, even one equal to it, and a
    coarse discretisation kept at one spacing is not reused at another."""
    prep = _prepared(_mixed())
    comps = prep.comps
    curve, other = comps[0][0].remove, comps[1][0].remove
    memo = ByCurve[int]()
    memo.keep(curve, 1)
    assert memo.find(curve) == 1 and memo.find(other) is None
    memo.keep_first(curve, 2)
    assert memo.find(curve) == 1
    known = ByCurve[DiscretePLD]()
    coarse = _discretised(curve, prep.h0, known)
    assert _discretised(curve, prep.h0, known) is coarse
    finer = _discretised(curve, prep.h0 / 2, known)
    assert finer.h == prep.h0 / 2

"""A tabulated profile holds only under its relation and certifies no lower bound; a per-unit
clipped sum inside a sample takes the sampled records only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.rdp import RDPAccountant
from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, LedgerViolationError, UnsupportedEventError
from dpledger.core.events import (
    GaussianEvent,
    ShuffledBatchesEvent,
    TabulatedProfileEvent,
)
from dpledger.core.lifting import lift_event
from dpledger.runtime.ledger import PrivacyLedger
from dpledger.runtime.units import DataUnits

#: the exact Laplace(eps0 = 1) profile under add/remove, at three points
LAPLACE_TABLE = TabulatedProfileEvent([0.0, 0.5, 1.0], [0.39347, 0.22120, 0.0])


@pytest.mark.parametrize("backend", [ClosedFormAccountant, RDPAccountant])
def test_a_table_is_refused_under_another_relation_by_every_backend(backend: type) -> None:
    # the truth under replace-one is eps = 2; the table states add/remove (eps = 1)
    with pytest.raises(UnsupportedEventError, match="tabulated under add_remove"):
        backend(Adjacency(relation="replace_one")).compose(LAPLACE_TABLE)


def test_a_coarsened_table_certifies_no_lower_bound() -> None:
    bound = ClosedFormAccountant().compose(LAPLACE_TABLE).get_epsilon(1e-6)
    assert bound.epsilon >= 0.999 and bound.epsilon_lower == 0.0  # pure 1-DP at delta 1e-6
    assert ClosedFormAccountant().compose(LAPLACE_TABLE).get_delta(0.5).delta_lower == 0.0


def test_lifting_keeps_the_table_and_its_relation() -> None:
    lifted, rules = lift_event(LAPLACE_TABLE, 2)
    assert isinstance(lifted, TabulatedProfileEvent) and lifted.relation == "add_remove"
    assert rules == ("tabulated_group_privacy",)
    assert lifted.epsilons == (0.0, 1.0, 2.0) and lifted.deltas[-1] == 0.0


def test_user_level_table_on_a_replace_one_source_is_refused(tmp_path: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        "delta = 1e-6\n"
        "[[sources]]\n"
        'name = "d"\n'
        'adjacency = { relation = "replace_one", unit = "user", unit_key = "uid", '
        "max_contributions = 2 }\n"
        "[[releases]]\n"
        'id = "t"\n'
        'input = "d"\n'
        'declared_unit = "row"\n'
        'event = { kind = "tabulated_profile", epsilons = [0.0, 0.5, 1.0], '
        'deltas = [0.39347, 0.22120, 0.0], relation = "add_remove" }\n'
    )
    code = main(["account", str(pipeline), "--json"])
    captured = capfd.readouterr()
    assert code == 2 and "tabulated under add_remove" in captured.err, captured.out
    # tabulated under the source's relation, it is lifted by group privacy, with no lower bound
    pipeline.write_text(
        pipeline.read_text().replace('relation = "add_remove" }', 'relation = "replace_one" }')
    )
    assert main(["account", str(pipeline), "--json"]) == 0
    out = json.loads(capfd.readouterr().out)
    assert out["epsilon"] >= 2.0 and out["epsilon_lower"] == 0.0


def test_impossible_tables_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="below 1 - e"):
        TabulatedProfileEvent([-1.0, 1.0], [0.5, 0.0])


def test_a_per_unit_sum_of_every_row_inside_a_shuffled_batch_is_refused() -> None:
    adjacency = Adjacency(relation="replace_one")
    ledger = PrivacyLedger(
        ShuffledBatchesEvent(100, 10, GaussianEvent(1.0)),
        adjacency=adjacency,
        rng=np.random.default_rng(0),
        units=DataUnits("data.uid", [np.arange(100)]),
    )
    rows = np.ones(100)
    epoch = ledger.shuffle_batches(100, 10, step="epoch")
    batch = next(iter(epoch))
    with pytest.raises(LedgerViolationError, match="100 units, but the open sample"), batch:
        ledger.clipped_sum_gaussian(rows, 1.0, 1.0, step="sum", per_unit=True)

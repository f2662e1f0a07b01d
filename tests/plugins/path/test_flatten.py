from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.path.data import hmm_dataset
from dpledger.plugins.path.flatten import FlatSpec, discretise, flatten, unflatten
from dpledger.plugins.path.marginals import marginal
from dpledger.plugins.path.schema import Column, TableSchema


def test_discretise_on_public_bounds() -> None:
    col = Column("x", "numeric", lower=0.0, upper=4.0)
    got = discretise(np.array([-1.0, 0.0, 0.99, 1.0, 3.99, 4.0, 9.0]), col, 4)
    assert got.tolist() == [0, 0, 0, 1, 3, 3, 3]


def test_truncate_and_pad_modes() -> None:
    tables, _ = hmm_dataset(30, seed=0)
    spec = FlatSpec(tables.schema, length=8, bins=5)
    rec = flatten(tables, spec)
    kept = int((tables.lengths >= 8).sum())
    assert len(spec.attributes) == 6 * 8 and all(len(v) == kept for v in rec.values())
    assert all(v.max() < s for v, s in zip(rec.values(), spec.shape, strict=True))
    pad = FlatSpec(tables.schema, length=25, bins=5, mode="pad")
    prec = flatten(tables, pad)
    assert len(prec["Glomozole@0"]) == 30
    # padding starts exactly at each user's length
    null = 5
    first_null = [
        int(np.argmax(np.r_[[prec[f"Glomozole@{t}"][i] for t in range(25)], [null]] == null))
        for i in range(30)
    ]
    assert first_null == tables.lengths.tolist()
    back = unflatten(prec, pad, np.random.default_rng(0))
    assert back.lengths.tolist() == tables.lengths.tolist()
    # round trip of codes: re-flattening the decoded tables gives the same codes
    again = flatten(back, pad)
    for a in pad.attributes:
        np.testing.assert_array_equal(again[a], prec[a])


def test_user_level_equals_row_level_on_flat_records() -> None:
    """Removing one user removes at most one flat record: each marginal moves by <= 1 cell."""
    tables, _ = hmm_dataset(25, seed=2)
    for mode in ("truncate", "pad"):
        spec = FlatSpec(tables.schema, length=8, bins=4, mode=mode)
        full = flatten(tables, spec)
        for drop in range(len(tables)):
            rest = tables.subset([i for i in range(len(tables)) if i != drop])
            part = flatten(rest, spec)
            n_full, n_part = len(full["Glomozole@0"]), len(part["Glomozole@0"])
            assert n_full - n_part in (0, 1)
            for cl in (("Glomozole@0",), ("Crirodex@3", "Crirodex@4")):
                diff = marginal(full, spec, cl) - marginal(part, spec, cl)
                assert np.abs(diff).sum() == n_full - n_part
                assert np.linalg.norm(diff) <= 1.0


def test_bad_spec() -> None:
    sch = TableSchema((Column("x", "numeric"),))
    with pytest.raises(InvalidParameterError, match="public bounds"):
        FlatSpec(sch, length=3)
    tables, _ = hmm_dataset(3, seed=0)
    with pytest.raises(InvalidParameterError, match="mode"):
        FlatSpec(tables.schema, length=3, mode="wide")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="length"):
        FlatSpec(tables.schema, length=0)

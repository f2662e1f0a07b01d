from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.trajectories.data import make_multimodal, validate_marginals


def test_multimodal_geometry_and_seed() -> None:
    a = make_multimodal(N=300, T=5, blur_var=0.0, seed=3)
    b = make_multimodal(N=300, T=5, blur_var=0.0, seed=3)
    assert len(a.marginals) == 5 and a.marginals[0].shape == (300, 2)
    np.testing.assert_array_equal(a.marginals[2], b.marginals[2])
    # without blur every path starts at (-1, 0), ends at (1, 0)
    np.testing.assert_allclose(a.marginals[0], np.tile([-1.0, 0.0], (300, 1)), atol=1e-12)
    np.testing.assert_allclose(a.marginals[-1], np.tile([1.0, 0.0], (300, 1)), atol=1e-12)
    # at t = 1/2 the three branches sit at (0, 1), (0, 0), (0, -1) in equal thirds (+-1)
    mid = a.marginals[2]
    np.testing.assert_allclose(mid[:, 0], 0.0, atol=1e-12)
    counts = [int(np.sum(np.isclose(mid[:, 1], y))) for y in (1.0, 0.0, -1.0)]
    assert sum(counts) == 300 and max(counts) - min(counts) <= 6
    # every point of every marginal belongs to a different person
    assert a.paths.shape == (1500, 5, 2)


def test_multimodal_blur_variance() -> None:
    d = make_multimodal(N=3000, T=3, blur_var=0.005, seed=0)
    start = d.marginals[0] - np.array([-1.0, 0.0])
    assert abs(start.var(axis=0).mean() - 0.005) < 0.0006


@pytest.mark.parametrize(
    ("marginals", "field", "word"),
    [
        ([np.zeros((3, 2))], "marginals", "at least 2"),
        ([np.zeros((3, 2)), np.zeros((0, 2))], "marginals[1]", "empty"),
        ([np.zeros((3, 2)), np.zeros((4, 3))], "marginals[1]", "dimension 3"),
        ([np.zeros((3, 2)), np.array([[0.0, np.nan]])], "marginals[1]", "NaN"),
        ([np.zeros((3, 2)), np.zeros(4)], "marginals[1]", "2-D"),
        ([np.zeros((3, 2)), np.array([[0.0, 2.0]])], "marginals[1]", "radius"),
    ],
)
def test_validation_errors(marginals: list[np.ndarray], field: str, word: str) -> None:
    with pytest.raises(InvalidParameterError) as err:
        validate_marginals(marginals, radius=1.5)
    assert err.value.field == field
    assert word in str(err.value) and "Fix:" in str(err.value)


def test_ragged_sizes_are_fine() -> None:
    out = validate_marginals([np.zeros((3, 2)), np.ones((5, 2)) * 0.1], radius=1.0)
    assert [len(x) for x in out] == [3, 5]

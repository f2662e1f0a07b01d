"""SWD against POT, the Frechet distance of Gaussians against closed forms."""

from __future__ import annotations

import numpy as np
import ot
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.swflow.metrics import (
    frechet_gaussian,
    sliced_wasserstein,
)


@pytest.mark.parametrize(("n", "m"), [(40, 40), (37, 53), (1, 5)])
def test_swd_equals_pot_for_the_same_projections(n: int, m: int) -> None:
    rng = np.random.default_rng(n + m)
    x, y = rng.normal(size=(n, 3)), rng.normal(size=(m, 3)) + 0.5
    proj = rng.normal(size=(3, 25))
    proj /= np.linalg.norm(proj, axis=0)
    ours = sliced_wasserstein(x, y, proj)
    ref = ot.sliced_wasserstein_distance(x, y, projections=proj)
    assert ours == pytest.approx(float(ref), rel=1e-10)


def test_swd_of_a_translation_in_one_dimension_is_the_shift() -> None:
    x = np.linspace(0, 1, 11)[:, None]
    assert sliced_wasserstein(x, x + 0.3, np.ones((1, 1))) == pytest.approx(0.3)


def test_swd_errors() -> None:
    with pytest.raises(InvalidParameterError, match="y"):
        sliced_wasserstein(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(InvalidParameterError, match="x"):
        sliced_wasserstein(np.full((3, 2), np.nan), np.zeros((3, 2)))


def test_frechet_closed_form_for_diagonal_gaussians() -> None:
    a, b = np.array([1.0, 4.0]), np.array([9.0, 1.0])
    value = frechet_gaussian([0, 0], np.diag(a), [1, 2], np.diag(b))
    assert value == pytest.approx(5 + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2))
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    assert frechet_gaussian([0, 0], cov, [0, 0], cov) == pytest.approx(0.0, abs=1e-10)

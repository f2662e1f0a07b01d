"""The trajectory paper's reproduction helpers (``experiments/trajectories``): the MNIST-stroke
loader and the path-level tools."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.trajectories.trajectories import sample_paths

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # the reproductions sit beside the package, not in it
    sys.path.insert(0, str(ROOT))

from experiments.trajectories.mnist_strokes import load_mnist_strokes  # noqa: E402
from experiments.trajectories.paths import exact_plans, path_w2  # noqa: E402

pytestmark = pytest.mark.experiments


def test_mnist_loader_matches_table2(mnist_path) -> None:  # type: ignore[no-untyped-def]
    table2 = {1: (674, 10), 2: (397, 15), 3: (408, 15), 6: (394, 15), 7: (626, 10), 9: (396, 15)}
    for digit, (N, T) in table2.items():
        d = load_mnist_strokes(mnist_path, digit)
        assert len(d.marginals) == T and all(len(x) == N for x in d.marginals)
        assert d.paths.shape[1:] == (T, 2)
        assert d.radius == pytest.approx(math.sqrt(0.5))
    with pytest.raises(InvalidParameterError) as err:
        load_mnist_strokes(mnist_path, 8)
    assert err.value.field == "digit"


def test_mnist_loader_missing_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError) as err:
        load_mnist_strokes(tmp_path / "absent.npz", 1)
    assert err.value.field == "path"


def test_path_w2_of_a_shift_is_the_shift_norm() -> None:
    rng = np.random.default_rng(0)
    P = rng.normal(size=(30, 4, 2))
    assert path_w2(P, P + np.array([0.0, 0.2])) == pytest.approx(0.2, rel=1e-9)


def test_exact_plans_follow_permutation() -> None:
    rng = np.random.default_rng(1)
    X0 = rng.normal(size=(8, 2))
    perm = rng.permutation(8)
    X1 = X0[perm] + 0.01
    plans = exact_plans(np.stack([X0, X1]))
    paths = sample_paths(np.stack([X0, X1]), plans, [0.0, 1.0], 50, 0.1, rng)
    # path through particle k at t0 must go to the particle that is k shifted
    np.testing.assert_allclose(paths.points[:, 1], paths.points[:, 0] + 0.01, atol=1e-12)

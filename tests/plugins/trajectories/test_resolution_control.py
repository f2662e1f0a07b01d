"""Resolution control for Table 1: re-resampling trajectories to fewer time points."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError

SCRIPT = Path(__file__).parents[3] / "experiments" / "trajectories" / "resolution_control.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trajectories_resolution_control", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_straight_line_resampled_to_ten_points() -> None:
    """15 equally spaced points on a line become the 10 equally spaced points on that line."""
    a, b = np.array([0.1, 0.9]), np.array([0.7, 0.3])
    line = a + np.linspace(0.0, 1.0, 15)[:, None] * (b - a)
    out = _script().resample_index(line[None], 10)
    assert out.shape == (1, 10, 2)
    want = a + (np.arange(10) / 9)[:, None] * (b - a)
    np.testing.assert_allclose(out[0], want, rtol=0, atol=1e-14)
    assert np.array_equal(out[0, 0], line[0]) and np.array_equal(out[0, -1], line[-1])


@pytest.mark.experiments
def test_resampling_is_linear_in_the_point_index() -> None:
    """x = 0, 1, 4 at indices 0, 1, 2 (not a line): 5 points at half-index steps."""
    traj = np.array([[[0.0, 0.0], [1.0, 0.0], [4.0, 0.0]]])
    out = _script().resample_index(traj, 5)
    np.testing.assert_allclose(out[0, :, 0], [0.0, 0.5, 1.0, 2.5, 4.0], rtol=0, atol=1e-14)


@pytest.mark.experiments
def test_endpoints_kept_and_identity_at_the_same_resolution() -> None:
    mod = _script()
    traj = np.random.default_rng(0).random((7, 15, 2))
    for T in (2, 3, 10, 15, 29):
        out = mod.resample_index(traj, T)
        assert np.array_equal(out[:, 0], traj[:, 0]) and np.array_equal(out[:, -1], traj[:, -1])
    assert np.array_equal(mod.resample_index(traj, 15), traj)


@pytest.mark.experiments
@pytest.mark.parametrize("T", [1, 2.5, True])
def test_bad_resolution_names_the_field(T: object) -> None:
    with pytest.raises(InvalidParameterError, match="T"):
        _script().resample_index(np.zeros((2, 15, 2)), T)


@pytest.mark.experiments
def test_variants_hold_the_same_persons_at_every_time(mnist_path: Path) -> None:
    mod = _script()
    with np.load(mnist_path) as z:
        traj = np.asarray(z["traj_6"], dtype=np.float64)
        single = int((z["nstrokes_6"] == 1).sum())
    for T in (15, 10):
        d = mod.load_variant(mnist_path, 6, "all", T)
        assert len(d.marginals) == T and all(len(x) == 300 for x in d.marginals)
        np.testing.assert_array_equal(d.marginals[0], traj[:, 0])
        np.testing.assert_array_equal(d.marginals[-1], traj[:, -1])
        s = mod.load_variant(mnist_path, 6, "single-stroke", T)
        assert all(len(x) == single for x in s.marginals)
    np.testing.assert_allclose(
        np.stack(mod.load_variant(mnist_path, 6, "all", 15).marginals, 1), traj, rtol=0, atol=1e-14
    )
    with pytest.raises(InvalidParameterError, match="T"):
        mod.load_variant(mnist_path, 6, "event-level", 10)


@pytest.mark.experiments
def test_random_subset_matches_the_single_stroke_count(mnist_path: Path) -> None:
    mod = _script()
    with np.load(mnist_path) as z:
        traj = np.asarray(z["traj_3"], dtype=np.float64)
        single = z["nstrokes_3"] == 1
    r = mod.load_variant(mnist_path, 3, "random-subset", 15)
    s = mod.load_variant(mnist_path, 3, "single-stroke", 15)
    assert len(r.marginals[0]) == len(s.marginals[0]) == int(single.sum())
    rows = {tuple(p.ravel()) for p in traj}
    assert all(tuple(p.ravel()) in rows for p in r.paths)  # persons of the digit, unchanged
    assert not np.array_equal(r.paths, s.paths)  # not the single-stroke persons


@pytest.mark.experiments
@pytest.mark.parametrize("T", [2, 10, 15])
def test_bin_positions_stay_inside_their_bin(T: int) -> None:
    pos = _script().bin_positions(500, T, seed=3)
    assert pos.shape == (500, T)
    lo, hi = np.arange(T) / T, (np.arange(T) + 1) / T
    assert np.all(pos >= lo) and np.all(pos <= hi)
    # uniform within the bin: offsets spread over the whole bin, mean near its centre
    off = pos * T - np.arange(T)
    assert off.min() < 0.01 and off.max() > 0.99
    assert abs(off.mean() - 0.5) < 0.03  # sd of the mean: 1 / sqrt(12 * 500 * T) < 0.013


@pytest.mark.experiments
def test_binned_straight_line_lies_on_the_bin_segment() -> None:
    """15 equally spaced points on a line: point i is a + u (b - a) with u in [i/T, (i+1)/T]."""
    mod = _script()
    a, b = np.array([0.1, 0.9]), np.array([0.7, 0.3])
    line = a + np.linspace(0.0, 1.0, 15)[:, None] * (b - a)
    T = 10
    out = mod.sample_binned(np.stack([line, line[::-1]]), T, seed=5)
    assert out.shape == (2, T, 2)
    u = (out - a) @ (b - a) / ((b - a) @ (b - a))  # coordinate along the line
    np.testing.assert_allclose(out, a + u[..., None] * (b - a), rtol=0, atol=1e-14)  # on it
    i = np.arange(T)
    assert np.all(u[0] >= i / T - 1e-14) and np.all(u[0] <= (i + 1) / T + 1e-14)
    rev = 1.0 - u[1]  # the reversed line runs from b to a
    assert np.all(rev >= i / T - 1e-14) and np.all(rev <= (i + 1) / T + 1e-14)
    np.testing.assert_allclose(u[0], mod.bin_positions(2, T, seed=5)[0], rtol=0, atol=1e-13)


@pytest.mark.experiments
def test_binned_interpolates_linearly_in_the_point_index() -> None:
    """x = k^2 at stored index k: the point at normalised position p has x from the chord."""
    mod = _script()
    traj = np.stack([np.arange(15.0) ** 2, np.zeros(15)], axis=1)[None]
    pos = mod.bin_positions(1, 4, seed=1)[0] * 14
    k = np.floor(pos)
    want = k**2 + (pos - k) * ((k + 1) ** 2 - k**2)
    np.testing.assert_allclose(mod.sample_binned(traj, 4, seed=1)[0, :, 0], want, rtol=1e-14)


@pytest.mark.experiments
def test_binned_same_seed_same_output() -> None:
    mod = _script()
    traj = np.random.default_rng(0).random((20, 15, 2))
    one, two = mod.sample_binned(traj, 10, seed=7), mod.sample_binned(traj, 10, seed=7)
    assert np.array_equal(one, two)
    assert not np.allclose(one, mod.sample_binned(traj, 10, seed=8))
    with pytest.raises(InvalidParameterError, match="T"):
        mod.sample_binned(traj, 1, seed=7)


@pytest.mark.experiments
def test_binned_variant_holds_every_person_at_every_time(mnist_path: Path) -> None:
    mod = _script()
    with np.load(mnist_path) as z:
        traj = np.asarray(z["traj_6"], dtype=np.float64)
    d = mod.load_variant(mnist_path, 6, "binned", 10, bin_seed=4)
    assert len(d.marginals) == 10 and all(len(x) == 300 for x in d.marginals)
    np.testing.assert_array_equal(np.stack(d.marginals, 1), mod.sample_binned(traj, 10, 4))
    assert not np.allclose(d.marginals[0], mod.load_variant(mnist_path, 6, "all", 10).marginals[0])


def test_command_line_defaults_parse() -> None:
    """The command extends Table 1's parser; its defaults (digits 6 and 3, seeds 0 to 2, both
    resolutions) parse without clashing with Table 1's own options."""
    args = _script().parser().parse_args([])
    assert args.digits == [6, 3] and args.seeds == [0, 1, 2] and args.T_values == [15, 10]
    assert _script().parser().parse_args(["--seeds", "4"]).seeds == [4]

"""Isotonic regression without ``scipy.optimize`` (accountant/isotonic.py): the same values and
blocks as SciPy's public function, and a fallback to it (that a query does not import the
package: tests/cli/test_lazy_imports.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import isotonic_regression as public

from dpledger.accountant import isotonic

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def samples(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(min_value=1, max_value=60))
    y = np.array(draw(st.lists(finite, min_size=n, max_size=n)))
    w = np.array(draw(st.lists(positive, min_size=n, max_size=n)))
    return y, w


def _reference(y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    found = public(y, weights=w)
    return np.asarray(found.x), np.asarray(found.blocks)


@settings(max_examples=300, deadline=None)
@given(samples())
def test_equals_scipys_public_function_bit_for_bit(sample: tuple[np.ndarray, np.ndarray]) -> None:
    y, w = sample
    values, blocks = isotonic.isotonic_regression(y, w)
    ref_values, ref_blocks = _reference(y, w)
    assert np.array_equal(values, ref_values)
    assert np.array_equal(blocks, ref_blocks)
    assert np.all(np.diff(values) >= 0)


def test_the_compiled_core_is_used_here_and_leaves_its_inputs_alone() -> None:
    assert isotonic._loaded_core() is not None
    y, w = np.array([5.0, 1.0, 4.0, 2.0, 3.0]), np.array([1.0, 2.0, 1.0, 1.0, 3.0])
    before = (y.copy(), w.copy())
    values, blocks = isotonic.isotonic_regression(y, w)
    assert np.array_equal(y, before[0]) and np.array_equal(w, before[1])
    # 5 and 1 (weight 2) pool to 7/3; 4 and 2 pool to 3, which 3 (weight 3) joins
    assert values.tolist() == [7 / 3, 7 / 3, 3.0, 3.0, 3.0] and blocks.tolist() == [0, 2, 5]


def test_long_slopes_of_a_nearly_linear_curve_pool_as_scipy_does() -> None:
    # the dominated pairs' inputs: ~1e5 slopes of a smooth convex curve with rounding noise
    rng = np.random.default_rng(0)
    slopes = np.linspace(-1.0, 0.0, 100_000) + rng.normal(0, 1e-9, 100_000)
    widths = rng.uniform(0.5, 1.5, 100_000)
    values, blocks = isotonic.isotonic_regression(slopes, widths)
    ref_values, ref_blocks = _reference(slopes, widths)
    assert np.array_equal(values, ref_values) and np.array_equal(blocks, ref_blocks)


def test_without_a_core_file_the_public_function_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isotonic, "_core_file", lambda: None)
    isotonic._loaded_core.cache_clear()
    try:
        assert isotonic._loaded_core() is None
        y, w = np.array([3.0, 1.0, 2.0, 0.5]), np.array([1.0, 1.0, 2.0, 1.0])
        values, blocks = isotonic.isotonic_regression(y, w)
        ref_values, ref_blocks = _reference(y, w)
        assert np.array_equal(values, ref_values) and np.array_equal(blocks, ref_blocks)
    finally:
        isotonic._loaded_core.cache_clear()


def test_a_core_that_answers_differently_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = ((3.0, 1.0, 2.0), (1.0, 1.0, 1.0), (2.0, 2.0, 2.5), (0, 3))
    monkeypatch.setattr(isotonic, "_KNOWN", (wrong,))
    isotonic._loaded_core.cache_clear()
    try:
        assert isotonic._loaded_core() is None
    finally:
        isotonic._loaded_core.cache_clear()


def _naive_core(x: np.ndarray, w: np.ndarray, starts: np.ndarray) -> tuple:
    """One pass that pools a point into the block before it, never further back."""
    values, blocks = [float(x[0])], [0]
    weights = [float(w[0])]
    for i in range(1, x.size):
        if x[i] < values[-1]:
            total = weights[-1] + w[i]
            values[-1] = (values[-1] * weights[-1] + x[i] * w[i]) / total
            weights[-1] = total
        else:
            values.append(float(x[i]))
            weights.append(float(w[i]))
            blocks.append(i)
    out = np.repeat(values, np.diff([*blocks, x.size]))
    starts[: len(blocks) + 1] = [*blocks, x.size]
    return out, np.array(weights), starts, len(blocks)


def test_the_known_inputs_tell_a_core_that_does_not_merge_back() -> None:
    assert isotonic.answers_known_inputs(isotonic._loaded_core())
    assert not isotonic.answers_known_inputs(_naive_core)


@pytest.mark.parametrize(
    ("y", "w", "message"),
    [
        (-np.arange(1000.0), np.ones(1), "equal length"),
        (np.array([3.0, 1.0, 2.0]), np.array([1.0, 0.0, 1.0]), "strictly positive"),
    ],
)
def test_inputs_the_core_does_not_check_are_refused_as_scipy_refuses_them(
    y: np.ndarray, w: np.ndarray, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        isotonic.isotonic_regression(y, w)

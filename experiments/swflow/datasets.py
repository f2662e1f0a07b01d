"""The data of the sliced-Wasserstein flow paper's experiments: the toy mixture of five
Gaussians (Fig. 1) and scikit-learn's bundled 8x8 digits split into public, private and test."""

from __future__ import annotations

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.swflow.data import FloatArray

__all__ = ["TOY_CENTRES", "TOY_STD", "DigitSplits", "digit_splits", "toy_mixture"]

#: centres of the toy mixture (a regular pentagon of radius 2) and the common std
_ANGLES = 2 * np.pi * np.arange(5) / 5 + np.pi / 2
TOY_CENTRES: FloatArray = 2.0 * np.stack([np.cos(_ANGLES), np.sin(_ANGLES)], axis=1)
TOY_STD = 0.2


def toy_mixture(n: int, rng: np.random.Generator) -> FloatArray:
    """``n`` points of the equal-weight mixture of five isotropic Gaussians in 2-D."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidParameterError("n", f"must be an integer >= 1, got {n!r}", "pass e.g. 1000")
    comp = rng.integers(0, 5, size=n)
    return np.asarray(TOY_CENTRES[comp] + TOY_STD * rng.standard_normal((n, 2)), dtype=np.float64)


@attrs.frozen
class DigitSplits:
    """Public (autoencoder, classifier), private (the flow) and held-out test images in
    ``[0, 1]`` (``n x 64``) with labels."""

    public: FloatArray
    public_labels: NDArray[np.int64]
    private: FloatArray
    private_labels: NDArray[np.int64]
    test: FloatArray
    test_labels: NDArray[np.int64]


def digit_splits(seed: int = 0, public: float = 0.4, test: float = 0.15) -> DigitSplits:
    """scikit-learn's 1797 bundled 8x8 digits (no download), shuffled and split by ``seed``."""
    from sklearn.datasets import load_digits

    if not (0 < public < 1 and 0 < test < 1 and public + test < 1):
        raise InvalidParameterError(
            "public",
            f"fractions public={public!r}, test={test!r} leave no private split",
            "use fractions in (0, 1) summing to less than 1",
        )
    bunch = load_digits()
    images = np.asarray(bunch.data, dtype=np.float64) / 16.0
    labels = np.asarray(bunch.target, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(images))
    n_pub = round(public * len(images))
    n_test = round(test * len(images))
    pub, tst, prv = order[:n_pub], order[n_pub : n_pub + n_test], order[n_pub + n_test :]
    return DigitSplits(images[pub], labels[pub], images[prv], labels[prv], images[tst], labels[tst])

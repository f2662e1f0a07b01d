"""Latent pipeline pieces: data splits, autoencoder on the sphere, feature classifier."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.swflow import latent
from dpledger.plugins.swflow.data import TOY_CENTRES, check_records, digit_splits, toy_mixture


def test_digit_splits_are_disjoint_and_complete() -> None:
    s = digit_splits(seed=0)
    assert len(s.public) + len(s.private) + len(s.test) == 1797
    assert s.public.shape[1] == 64 and s.public.min() >= 0 and s.public.max() <= 1
    rows = {r.tobytes() for r in s.public} & {r.tobytes() for r in s.private}
    assert len(rows) <= 5  # the digits set holds a few exact duplicate images
    with pytest.raises(InvalidParameterError, match="public"):
        digit_splits(public=0.9, test=0.2)


def test_toy_mixture_has_five_equal_components() -> None:
    x = toy_mixture(5000, np.random.default_rng(0))
    nearest = np.argmin(((x[:, None, :] - TOY_CENTRES[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_allclose(np.bincount(nearest, minlength=5) / 5000, 0.2, atol=0.02)
    with pytest.raises(InvalidParameterError, match="n"):
        toy_mixture(0, np.random.default_rng(0))


def test_autoencoder_latents_are_unit_and_training_helps() -> None:
    s = digit_splits(seed=1)
    untrained = latent.train_autoencoder(s.public[:150], 4, epochs=1, lr=1e-6, seed=0)
    trained = latent.train_autoencoder(s.public[:150], 4, epochs=8, seed=0)
    z = latent.encode(trained, s.test[:50])
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, rtol=1e-10)

    def err(model: latent.AutoEncoder) -> float:
        recon = latent.decode(model, latent.encode(model, s.test[:100]))
        return float(np.mean((recon - s.test[:100]) ** 2))

    assert err(trained) < 0.7 * err(untrained)
    # decoding projects arbitrary latents back onto the sphere first
    np.testing.assert_allclose(latent.decode(trained, 3 * z), latent.decode(trained, z))


def test_classifier_learns_the_public_split() -> None:
    s = digit_splits(seed=2)
    clf = latent.train_classifier(s.public, s.public_labels, epochs=10, seed=0)
    assert latent.accuracy(clf, s.test, s.test_labels) > 0.85
    assert latent.features(clf, s.test[:5]).shape == (5, 32)
    with pytest.raises(InvalidParameterError, match="epochs"):
        latent.train_classifier(s.public, s.public_labels, epochs=0)


def test_check_records_rejects_bad_input() -> None:
    for bad, problem in [
        (np.zeros((0, 2)), "empty"),
        (np.zeros(3), "2-D"),
        (np.array([[np.inf, 1.0]]), "NaN"),
    ]:
        with pytest.raises(InvalidParameterError, match=problem):
            check_records(bad)

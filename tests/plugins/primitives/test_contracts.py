"""Every builtin primitive passes the method contract that third-party plugins subclass."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from dpledger.plugins.primitives import (
    bounded_mean,
    dp_sgd,
    gaussian,
    histogram,
    laplace,
    nn_voting,
    selection,
)
from dpledger.runtime.testing import MethodPluginContract


class TestGaussianContract(MethodPluginContract):
    spec = gaussian.SPEC
    valid_params: ClassVar[dict[str, Any]] = {"sensitivity": 2.0, "noise_multiplier": 1.5}
    bad_params: ClassVar[list[dict[str, Any]]] = [
        {"sensitivity": 0.0},
        {"noise_multiplier": -1.0},
        {"noise_multiplier": "x"},
    ]

    def make_data(self, rng: np.random.Generator) -> Any:
        return rng.normal(size=4)


class TestLaplaceContract(MethodPluginContract):
    spec = laplace.SPEC
    valid_params: ClassVar[dict[str, Any]] = {"sensitivity": 1.0, "noise_multiplier": 2.0}
    bad_params: ClassVar[list[dict[str, Any]]] = [
        {"sensitivity": float("inf")},
        {"noise_multiplier": 0},
    ]

    def make_data(self, rng: np.random.Generator) -> Any:
        return rng.normal(size=3)


class TestBoundedMeanContract(MethodPluginContract):
    spec = bounded_mean.SPEC
    valid_params: ClassVar[dict[str, Any]] = {"radius": 1.0, "noise_multiplier": 1.0, "n": 40}
    bad_params: ClassVar[list[dict[str, Any]]] = [{"n": 0}, {"n": 2.5}, {"radius": -1.0}]

    def make_data(self, rng: np.random.Generator) -> Any:
        return rng.normal(size=(40, 3))


class TestHistogramContract(MethodPluginContract):
    spec = histogram.SPEC
    valid_params: ClassVar[dict[str, Any]] = {
        "num_bins": 5,
        "noise_multiplier": 1.0,
        "mechanism": "gaussian",
    }
    bad_params: ClassVar[list[dict[str, Any]]] = [
        {"mechanism": "cauchy"},
        {"num_bins": 0},
        {"clamp_nonnegative": "yes"},
    ]

    def make_data(self, rng: np.random.Generator) -> Any:
        return rng.integers(0, 5, size=100)


class TestExponentialContract(MethodPluginContract):
    spec = selection.EXPONENTIAL
    valid_params: ClassVar[dict[str, Any]] = {"epsilon": 1.0}
    bad_params: ClassVar[list[dict[str, Any]]] = [{"epsilon": 0.0}, {"monotonic": 1}]

    def make_data(self, rng: np.random.Generator) -> Any:
        return rng.normal(size=6)


class TestReportNoisyMaxContract(MethodPluginContract):
    spec = selection.REPORT_NOISY_MAX
    valid_params: ClassVar[dict[str, Any]] = {"epsilon": 0.5, "sensitivity": 2.0}
    bad_params: ClassVar[list[dict[str, Any]]] = [{"sensitivity": 0.0}]

    def make_data(self, rng: np.random.Generator) -> Any:
        return rng.normal(size=6)


class TestNoisyTopKContract(MethodPluginContract):
    spec = selection.NOISY_TOP_K
    valid_params: ClassVar[dict[str, Any]] = {"epsilon": 0.5, "k": 3}
    bad_params: ClassVar[list[dict[str, Any]]] = [{"k": 0}]

    def make_data(self, rng: np.random.Generator) -> Any:
        return rng.normal(size=6)


class TestNNVotingContract(MethodPluginContract):
    spec = nn_voting.SPEC
    valid_params: ClassVar[dict[str, Any]] = {"k": 2, "top_n": 3, "noise_multiplier": 1.0}
    bad_params: ClassVar[list[dict[str, Any]]] = [{"k": 0}, {"top_n": -2}]

    def make_data(self, rng: np.random.Generator) -> Any:
        return {"records": rng.normal(size=(30, 2)), "candidates": rng.normal(size=(8, 2))}


class TestDPSGDContract(MethodPluginContract):
    spec = dp_sgd.SPEC
    valid_params: ClassVar[dict[str, Any]] = {
        "steps": 5,
        "sampling_probability": 0.2,
        "noise_multiplier": 1.1,
        "clip_norm": 1.0,
        "expected_batch_size": 8.0,
    }
    bad_params: ClassVar[list[dict[str, Any]]] = [
        {"sampling_probability": 1.5},
        {"sampling_probability": 0.0},
        {"steps": 0},
    ]

    def make_data(self, rng: np.random.Generator) -> Any:
        x = rng.normal(size=(40, 2))
        return {"x": x, "y": (x[:, 0] > 0).astype(float)}

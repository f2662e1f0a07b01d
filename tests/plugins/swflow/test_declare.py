"""Declared events, adjacency, calibration (analytic Gaussian, sampled composition)."""

from __future__ import annotations

import math

import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    GaussianEvent,
    NonPrivateEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)
from dpledger.plugins.swflow.declare import declare, noise_multiplier_for
from dpledger.plugins.swflow.params import FlowParams, FlowResampleParams, GenParams
from dpledger.plugins.swflow.sensitivity import classical_gaussian_sigma, gaussian_exact_delta
from dpledger.runtime.testing import forbid_imports

RO = Adjacency(relation="replace_one")


def test_resample_and_gen_declare_sampled_composition() -> None:
    for cls in (FlowResampleParams, GenParams):
        p = cls(dataset_size=100, batch_size=10, num_steps=7, noise_multiplier=1.5)
        assert declare(p, RO) == SelfComposedEvent(
            SampledWithoutReplacementEvent(100, 10, GaussianEvent(1.5)), 7
        )


def test_flow_declares_one_gaussian_release_whatever_the_steps() -> None:
    assert declare(FlowParams(num_steps=5000, noise_multiplier=2.0), RO) == GaussianEvent(2.0)


def test_non_private_declares_non_private() -> None:
    assert declare(FlowParams(), RO) == NonPrivateEvent()


def test_probabilistic_bound_charges_failure_per_projection_matrix() -> None:
    p = FlowResampleParams(
        dataset_size=100,
        batch_size=10,
        num_steps=7,
        noise_multiplier=1.5,
        sensitivity_bound="probabilistic",
        failure_probability=1e-9,
    )
    assert declare(p, RO) == ComposedEvent(
        [
            SelfComposedEvent(SampledWithoutReplacementEvent(100, 10, GaussianEvent(1.5)), 7),
            SelfComposedEvent(ApproxDPEvent(0.0, 1e-9), 7),
        ]
    )
    q = FlowParams(noise_multiplier=1.5, sensitivity_bound="probabilistic", delta=1e-5)
    assert declare(q, RO) == ComposedEvent([GaussianEvent(1.5), ApproxDPEvent(0.0, 1e-5 / 10)])
    # the failure probability really reaches delta: (0, p) steps alone give delta >= T p
    big = FlowResampleParams(
        dataset_size=100,
        batch_size=10,
        num_steps=7,
        noise_multiplier=50.0,
        sensitivity_bound="probabilistic",
        failure_probability=1e-6,
    )
    delta_at_tiny_eps = account(declare(big, RO), RO, epsilon=1e-3).bound.delta
    assert delta_at_tiny_eps >= 7e-6 * (1 - 1e-6)


def test_add_remove_and_user_level_are_refused() -> None:
    p = FlowParams(noise_multiplier=1.0)
    with pytest.raises(InvalidParameterError, match=r"adjacency.*replace_one"):
        declare(p, Adjacency())
    with pytest.raises(InvalidParameterError, match="adjacency"):
        declare(
            p, Adjacency(relation="replace_one", unit="user", max_contributions=2, unit_key="u")
        )


@pytest.mark.parametrize("eps", [10.0, 5.0, 0.5])
def test_flow_calibration_is_analytic_gaussian_and_valid(eps: float) -> None:
    delta = 1e-5
    m = noise_multiplier_for(FlowParams(target_epsilon=eps, delta=delta), RO)
    assert m is not None
    # replace-one: sensitivity 2 C, std m C -> exact delta of N(0, m^2) with sensitivity 2
    assert gaussian_exact_delta(eps, m, 2.0) <= delta
    assert gaussian_exact_delta(eps, m * (1 - 1e-4), 2.0) > delta  # and tight
    classical = classical_gaussian_sigma(eps, delta, 2.0)
    assert not math.isclose(m, classical, rel_tol=1e-3)
    bound = account(declare(FlowParams(target_epsilon=eps, delta=delta), RO), RO, delta=delta)
    assert bound.bound.epsilon <= eps


def test_classical_calibration_is_invalid_where_ours_is_valid() -> None:
    eps, delta = 10.0, 5e-6
    classical = classical_gaussian_sigma(eps, delta, 2.0)
    assert gaussian_exact_delta(eps, classical, 2.0) > delta
    ours = noise_multiplier_for(FlowParams(target_epsilon=eps, delta=delta), RO)
    assert ours is not None and ours > classical
    assert gaussian_exact_delta(eps, ours, 2.0) <= delta


def test_probabilistic_flow_calibration_keeps_total_delta() -> None:
    p = FlowParams(target_epsilon=5.0, delta=1e-5, sensitivity_bound="probabilistic")
    event = declare(p, RO)
    assert account(event, RO, delta=1e-5).bound.epsilon <= 5.0
    m = noise_multiplier_for(p, RO)
    assert m is not None and gaussian_exact_delta(5.0, m, 2.0) <= 1e-5 - 1e-6


def test_sampled_calibration_meets_target() -> None:
    p = FlowResampleParams(dataset_size=200, batch_size=20, num_steps=10, target_epsilon=4.0)
    m = noise_multiplier_for(p, RO)
    assert m is not None
    assert account(declare(p, RO), RO, delta=1e-5).bound.epsilon <= 4.0
    assert (
        account(
            SelfComposedEvent(SampledWithoutReplacementEvent(200, 20, GaussianEvent(m * 0.98)), 10),
            RO,
            delta=1e-5,
        ).bound.epsilon
        > 4.0
    )


def test_declare_imports_neither_torch_nor_pot() -> None:
    with forbid_imports("torch", "ot"):
        declare(
            FlowResampleParams(
                dataset_size=50,
                batch_size=5,
                num_steps=3,
                noise_multiplier=3.0,
                sensitivity_bound="probabilistic",
            ),
            RO,
        )
        declare(FlowParams(target_epsilon=3.0), RO)


@pytest.mark.parametrize(
    ("cls", "kwargs", "field"),
    [
        (FlowParams, {"noise_multiplier": 0.0}, "noise_multiplier"),
        (FlowParams, {"noise_multiplier": -1.0}, "noise_multiplier"),
        (FlowParams, {"step_size": 0.0}, "step_size"),
        (FlowParams, {"step_size": -1.0}, "step_size"),
        (FlowParams, {"target_epsilon": 0.0}, "target_epsilon"),
        (FlowParams, {"target_epsilon": float("inf")}, "target_epsilon"),
        (FlowParams, {"target_epsilon": float("nan")}, "target_epsilon"),
        (FlowParams, {"delta": 0.0}, "delta"),
        (FlowParams, {"delta": 1.0}, "delta"),
        (FlowParams, {"noise_multiplier": 1.0, "target_epsilon": 1.0}, "target_epsilon"),
        (FlowParams, {"num_sub_projections": 80, "num_projections": 70}, "num_sub_projections"),
        (FlowParams, {"reg": -0.1}, "reg"),
        (FlowParams, {"sensitivity_bound": "magic"}, "sensitivity_bound"),
        (FlowParams, {"evaluate_at": "x"}, "evaluate_at"),
        (FlowResampleParams, {"batch_size": 20, "dataset_size": 10}, "batch_size"),
        (GenParams, {"batch_size": 20, "dataset_size": 10}, "batch_size"),
        (GenParams, {"learning_rate": 0.0}, "learning_rate"),
        (
            FlowResampleParams,
            {
                "sensitivity_bound": "probabilistic",
                "noise_multiplier": 1.0,
                "failure_probability": 1e-3,
            },
            "failure_probability",
        ),
    ],
)
def test_bad_parameters_name_the_field(cls: type, kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        cls(**kwargs)
    assert info.value.field == field
    assert info.value.fix

"""DP-SGD in numpy: Poisson sampling, per-example clipping, Gaussian noise on the gradient sum.

Each of ``steps`` steps includes every record independently with probability
``sampling_probability`` (an empty batch is kept, never re-drawn), clips each per-example
gradient to L2 norm ``clip_norm`` (add/remove sensitivity of the sum: ``clip_norm``), adds
``N(0, (noise_multiplier * clip_norm)^2)`` to the sum and divides by the *public*
``expected_batch_size``. The method trains a logistic regression; :func:`dp_sgd_step` is the
reusable step. Declared event: ``SelfComposed(PoissonSampled(q, Gaussian(sigma)), steps)``.

``data`` is a mapping with ``x`` (n, d) and ``y`` (n,) in {0, 1}, or one array whose last
column is the label.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.plugin import (
    Adjacency,
    Event,
    GaussianEvent,
    InvalidParameterError,
    Ledger,
    MethodSpec,
    PoissonSampledEvent,
    ProofRef,
    SelfComposedEvent,
    hookimpl,
    positive_finite,
    positive_int,
    probability,
)
from dpledger.plugins.primitives._common import field_of, float_matrix, is_bool

FloatArray = NDArray[np.float64]
GradFn = Callable[[FloatArray, FloatArray, FloatArray], FloatArray]


@attrs.frozen
class DPSGDParams:
    """Hyper-parameters; ``expected_batch_size`` must be public (not computed from the data)."""

    steps: int = attrs.field(validator=positive_int)
    sampling_probability: float = attrs.field(validator=probability)
    noise_multiplier: float = attrs.field(validator=positive_finite)
    clip_norm: float = attrs.field(validator=positive_finite)
    expected_batch_size: float = attrs.field(validator=positive_finite)
    learning_rate: float = attrs.field(default=0.5, validator=positive_finite)
    fit_intercept: bool = attrs.field(default=True, validator=is_bool)

    def __attrs_post_init__(self) -> None:
        if self.sampling_probability == 0:
            raise InvalidParameterError(
                "sampling_probability", "is 0, so nothing is trained", "use a rate in (0, 1]"
            )


def declare(params: DPSGDParams, adjacency: Adjacency) -> Event:
    step = PoissonSampledEvent(params.sampling_probability, GaussianEvent(params.noise_multiplier))
    return SelfComposedEvent(step, params.steps)


def logistic_grads(w: FloatArray, x: FloatArray, y: FloatArray) -> FloatArray:
    """Per-example gradients of the logistic loss, shape (batch, d)."""
    z = np.clip(x @ w, -30.0, 30.0)
    residual = 1.0 / (1.0 + np.exp(-z)) - y
    return residual[:, None] * x


def dp_sgd_step(
    ledger: Ledger,
    w: FloatArray,
    x: FloatArray,
    y: FloatArray,
    *,
    params: DPSGDParams,
    t: int,
    grads: GradFn = logistic_grads,
) -> FloatArray:
    """One DP-SGD step; returns the updated weights."""
    with ledger.poisson_sample(
        x.shape[0], params.sampling_probability, step=f"dp_sgd.sample[{t}]"
    ) as batch:
        g = grads(w, x[batch.indices], y[batch.indices])
        noisy = ledger.clipped_sum_gaussian(
            g, params.clip_norm, params.noise_multiplier, step=f"dp_sgd.noise[{t}]"
        )
    return w - params.learning_rate * np.asarray(noisy) / params.expected_batch_size


def _xy(data: Any) -> tuple[FloatArray, FloatArray]:
    if isinstance(data, np.ndarray | list):
        arr = float_matrix("data", data, ndim=2)
        x, y = arr[:, :-1], arr[:, -1]
    else:
        x = float_matrix("data.x", field_of(data, "x"), ndim=2)
        y = float_matrix("data.y", field_of(data, "y"), ndim=1)
    if x.shape[0] != y.shape[0] or not np.all((y == 0) | (y == 1)):
        raise InvalidParameterError(
            "data.y", "must hold one 0/1 label per row of x", "encode labels as 0 and 1"
        )
    return x, y


def run(params: DPSGDParams, data: Any, ledger: Ledger, rng: np.random.Generator) -> dict[str, Any]:
    x, y = _xy(data)
    if params.fit_intercept:
        x = np.hstack([x, np.ones((x.shape[0], 1))])
    w = np.zeros(x.shape[1])
    for t in range(params.steps):
        w = dp_sgd_step(ledger, w, x, y, params=params, t=t)
    return {"weights": w}


SPEC = MethodSpec(
    name="dp_sgd_logistic",
    params=DPSGDParams,
    declare=declare,
    run=run,
    description="Logistic regression by DP-SGD (Poisson sampling, per-example clipping, "
    "Gaussian noise), numpy only",
    proof=ProofRef(
        "Abadi et al. 2016, Algorithm 1; sensitivity clip_norm of the clipped sum "
        "under add/remove; Poisson subsampling (Zhu & Wang 2019)"
    ),
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)

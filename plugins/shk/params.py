"""Validated parameters of an SHK exponential-mechanism release (the ``shk`` method).

The released object is one draw (``n_samples`` draws, composed) from the time-``t`` law of the
SHK flow towards ``π_D ∝ exp(−β L_D)`` started at a data-independent von Mises density
``ρ_0 ∝ exp(κ cos(x − μ))`` on the torus [−π, π).

Loss (``loss``): the mean ``L_D = (1/n) Σ_i ℓ(·; y_i)`` of per-record losses with values in
``[0, loss_range]``:

* ``"cosine"`` — ``ℓ(θ; y) = 1 − cos(θ − y)`` (``loss_range = 2``); the data are the angles
  ``y_i`` (a 1-D array, radians);
* ``"grid"`` — the data are the per-record loss values on the solver grid, an
  ``(n_records, n_cells)`` array whose column ``j`` is the loss at the cell midpoint
  ``x_j = −π + (j + ½)·2π/n_cells``. Python callers with a loss function ``ℓ(θ; y)`` evaluate it on
  ``TorusGrid(n_cells).x`` (``torus.check_potential`` rejects non-periodic functions).

Sensitivities are data-independent: with ``n`` public and the empirical risk the loss sum over
``max(records, n)`` (the mean from ``n`` records on),
``‖V_D − V_D′‖∞ ≤ β·loss_range/n`` and ``osc(V_D − V_D′) ≤ 2β·loss_range/n`` for add/remove and
replace-one neighbours alike. ``delta_pot`` / ``delta_osc`` (grid losses only) declare tighter
bounds on the potential ``V = βL`` that the caller vouches for.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from dpledger.plugin import InvalidParameterError, one_of
from dpledger.plugins.shk.torus import DEFAULT_CELLS

LOSSES = ("cosine", "grid")
SOLVERS = ("grid", "particles")
CERTIFICATES = ("pure", "kl", "tighter")


def _number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise InvalidParameterError(field, f"expected a number, got {value!r}", "pass a float")
    v = float(value)
    if not math.isfinite(v):
        raise InvalidParameterError(field, f"must be finite, got {value!r}", "pass a finite number")
    return v


def _nonneg(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if _number(attribute.name, value) < 0:
        raise InvalidParameterError(
            attribute.name, f"must be >= 0, got {value!r}", "pass a non-negative number"
        )


def _positive(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if _number(attribute.name, value) <= 0:
        raise InvalidParameterError(
            attribute.name, f"must be > 0, got {value!r}", "pass a positive number"
        )


def _finite(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    _number(attribute.name, value)


def _optional_positive(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _positive(instance, attribute, value)


def _int_at_least(low: int) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise InvalidParameterError(
                attribute.name, f"must be an integer >= {low}, got {value!r}", f"pass >= {low}"
            )

    return check


def _delta_target(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not 0.0 < _number(attribute.name, value) < 1.0:
        raise InvalidParameterError(
            attribute.name, f"must lie in (0, 1), got {value!r}", "pass e.g. 1e-5"
        )


@attrs.frozen
class SHKMethodParams:
    """Parameters of the ``shk`` method (see the module docstring for the loss conventions).

    ``t``: flow time; ``beta``: inverse temperature of ``π_D ∝ e^{−βL_D}``; ``n``: public lower
    bound on the number of records; ``rho0_kappa``/``rho0_mu``: the initial von Mises density;
    ``solver``: ``"grid"`` (finite-volume PDE, ``n_cells``; ``dt`` caps the RK4 step, which never
    exceeds the default 45 % of the stability limit) or ``"particles"`` (birth–death Langevin
    with ``n_particles`` particles and step ``particle_dt``; no privacy guarantee);
    ``n_samples``: number of released draws (composed). ``certificate``: ``"pure"`` (Theorem 3),
    ``"kl"`` (Theorem 4 with Theorem 2's KL bound at ``approx_epsilon``) or ``"tighter"`` (the KL
    certificate when its δ is at most ``target_delta`` and its ε is below the pure ε);
    ``grad_sensitivity`` (A2, ``Δ_grad ≥ ‖∇V_D − ∇V_D′‖∞``; computed for the cosine loss) and
    ``lsi_constant`` (A3; default: Holley–Stroock ``e^{−β·loss_range}``) feed Theorem 2.
    """

    t: float = attrs.field(validator=_nonneg)
    beta: float = attrs.field(validator=_positive)
    n: int = attrs.field(validator=_int_at_least(1))
    loss: str = attrs.field(default="cosine", validator=one_of(*LOSSES))
    loss_range: float = attrs.field(default=2.0, validator=_positive)
    delta_pot: float | None = attrs.field(default=None, validator=_optional_positive)
    delta_osc: float | None = attrs.field(default=None, validator=_optional_positive)
    rho0_kappa: float = attrs.field(default=0.0, validator=_nonneg)
    rho0_mu: float = attrs.field(default=0.0, validator=_finite)
    solver: str = attrs.field(default="grid", validator=one_of(*SOLVERS))
    n_cells: int = attrs.field(default=DEFAULT_CELLS, validator=_int_at_least(8))
    dt: float | None = attrs.field(default=None, validator=_optional_positive)
    n_particles: int = attrs.field(default=256, validator=_int_at_least(2))
    particle_dt: float = attrs.field(default=0.01, validator=_positive)
    n_samples: int = attrs.field(default=1, validator=_int_at_least(1))
    certificate: str = attrs.field(default="pure", validator=one_of(*CERTIFICATES))
    approx_epsilon: float | None = attrs.field(default=None, validator=_optional_positive)
    target_delta: float | None = attrs.field(default=None, validator=_delta_target)
    grad_sensitivity: float | None = attrs.field(default=None, validator=_optional_positive)
    lsi_constant: float | None = attrs.field(default=None, validator=_optional_positive)

    def __attrs_post_init__(self) -> None:
        if self.loss == "cosine":
            if self.loss_range != 2.0:
                raise InvalidParameterError(
                    "loss_range",
                    f"the cosine loss has range 2, got {self.loss_range!r}",
                    "drop loss_range for loss = 'cosine'",
                )
            if self.delta_pot is not None or self.delta_osc is not None:
                raise InvalidParameterError(
                    "delta_pot",
                    "is computed exactly for the cosine loss",
                    "drop delta_pot / delta_osc, or use loss = 'grid'",
                )
        if self.certificate != "pure" and self.approx_epsilon is None:
            raise InvalidParameterError(
                "approx_epsilon",
                f"is required for certificate = {self.certificate!r}",
                "pass the epsilon at which the KL / hockey-stick certificate is evaluated",
            )
        if self.certificate == "tighter" and self.target_delta is None:
            raise InvalidParameterError(
                "target_delta",
                "is required for certificate = 'tighter'",
                "pass the delta you account at, e.g. 1e-5",
            )
        if self.certificate != "pure" and self.loss == "grid" and self.grad_sensitivity is None:
            raise InvalidParameterError(
                "grad_sensitivity",
                "assumption (A2) is needed for the KL certificate",
                "pass a public bound on ‖∇V_D − ∇V_D′‖∞ (V = β·L) over neighbours",
            )

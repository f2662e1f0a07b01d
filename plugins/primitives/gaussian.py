"""Gaussian mechanism on a vector query whose add/remove L2 sensitivity the caller states.

``data`` is the exact query answer. The caller vouches for ``sensitivity`` (honest-but-curious):
adding or removing one record moves the answer by at most ``sensitivity`` in L2 norm.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec, ProofRef
from dpledger.core.validation import positive_finite
from dpledger.plugins.primitives._common import float_matrix
from dpledger.runtime.ledger import PrivacyLedger


@attrs.frozen
class GaussianParams:
    """``sensitivity``: add/remove L2 bound; noise std is ``noise_multiplier * sensitivity``."""

    sensitivity: float = attrs.field(validator=positive_finite)
    noise_multiplier: float = attrs.field(validator=positive_finite)


def declare(params: GaussianParams, adjacency: Adjacency) -> Event:
    return GaussianEvent(params.noise_multiplier)


def run(
    params: GaussianParams, data: Any, ledger: PrivacyLedger, rng: np.random.Generator
) -> dict[str, Any]:
    answer = np.atleast_1d(float_matrix("data", data, ndim=None))
    release = ledger.gaussian(answer, params.sensitivity, params.noise_multiplier, step="gaussian")
    return {"release": np.atleast_1d(release)}


SPEC = MethodSpec(
    name="gaussian_mechanism",
    params=GaussianParams,
    declare=declare,
    run=run,
    description="Gaussian noise on a vector query of stated add/remove L2 sensitivity",
    proof=ProofRef("Balle & Wang 2018, Theorem 8 (analytic Gaussian mechanism)"),
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)

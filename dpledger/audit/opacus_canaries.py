"""One-run white-box audit of an Opacus training run: gradient canaries in its noisy sums.

:meth:`OpacusCanaries.attach` takes the ``DPOptimizer`` and the Poisson data loader that
``PrivacyEngine.make_private`` returned, before training. It adds one parameter of ``m``
coordinates (learning rate 0: the model never uses it), and at every step, before Opacus's
``pre_step`` clips:

* each included canary (each with probability 1/2) is drawn into the batch with the loader's
  sampling rate, as a record would be;
* every parameter's per-sample gradients get a zero row per drawn canary, and the canary
  parameter the clip norm in the canary's coordinate (zero for the batch's records);

so Opacus's own per-sample clipping and its own noise run on them. After Opacus adds the noise
the canary coordinates of the noisy sum are kept. :meth:`OpacusCanaries.audit` scores them
(:func:`~dpledger.audit.whitebox.canary_scores`) and bounds epsilon from below beside the
certified bracket of ``steps`` Poisson-sampled Gaussian steps at the noise multiplier, clip norm
and rate read at attach time (what was declared).

The canaries' draws into batches are made here, not by Opacus's sampler: this audits Opacus's
clipping and noise, not its sampler. Flat clipping only; no gradient accumulation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dpledger.audit.canaries import MIN_CANARIES, OneRunResult, delta_row
from dpledger.audit.whitebox import NoisyStep, canary_scores
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent


def _check_optimizer(optimizer: Any) -> None:
    from opacus.optimizers import DPOptimizer

    if type(optimizer) is not DPOptimizer:
        raise InvalidParameterError(
            "optimizer",
            f"{type(optimizer).__name__} is not supported by the one-run audit",
            "pass the DPOptimizer that make_private returned, with flat clipping",
        )


def _sample_rate(loader: Any) -> float:
    rate = getattr(loader, "sample_rate", None)
    if rate is None:
        raise InvalidParameterError(
            "data_loader",
            "is not Opacus's Poisson data loader, so no rate draws the canaries",
            "call make_private(..., poisson_sampling=True) and pass its data loader",
        )
    return float(rate)


class OpacusCanaries:
    """Gradient canaries in an Opacus ``DPOptimizer``'s noisy sums (see the module)."""

    def __init__(self, optimizer: Any, rate: float, m: int, seed: int | None) -> None:
        import torch

        self.optimizer, self.rate, self.m = optimizer, rate, m
        self.rng = np.random.default_rng(seed)
        self.included = self.rng.random(m) < 0.5
        self.ids = np.flatnonzero(self.included)
        self.noise_multiplier = float(optimizer.noise_multiplier)
        self.clip = float(optimizer.max_grad_norm)
        self.param = torch.nn.Parameter(torch.zeros(m))
        optimizer.original_optimizer.add_param_group({"params": [self.param], "lr": 0.0})
        self.steps: list[NoisyStep] = []
        self._pre_step_fn, self._noise_fn = optimizer.pre_step, optimizer.add_noise
        optimizer.pre_step = self._pre_step
        optimizer.add_noise = self._add_noise

    @classmethod
    def attach(
        cls, optimizer: Any, data_loader: Any, *, canaries: int = 1000, seed: int | None = None
    ) -> OpacusCanaries:
        """Canaries in the run of ``optimizer`` over ``data_loader`` (at most one a record)."""
        _check_optimizer(optimizer)
        rate = _sample_rate(data_loader)
        n = len(data_loader.dataset)
        if isinstance(canaries, bool) or not MIN_CANARIES <= canaries <= n:
            raise InvalidParameterError(
                "canaries",
                f"must be an integer in [{MIN_CANARIES}, {n}] (at most one a record), "
                f"got {canaries!r}",
                f"pass at most {n}",
            )
        return cls(optimizer, rate, int(canaries), seed)

    def _model_params(self) -> list[Any]:
        params = [p for p in self.optimizer.params if p is not self.param]
        if any(getattr(p, "grad_sample", None) is None for p in params):
            raise InvalidParameterError(
                "model",
                "has parameters without per-sample gradients",
                "train the module make_private returned (a GradSampleModule) with layers "
                "Opacus supports",
            )
        if any(isinstance(p.grad_sample, list) for p in params):
            raise InvalidParameterError(
                "optimizer",
                "accumulated several batches before a step",
                "step after every batch to audit in one run",
            )
        return params

    def _pre_step(self, closure: Any = None) -> Any:
        import torch

        params = self._model_params()
        drawn = self.ids[self.rng.random(self.ids.size) < self.rate]
        batch = len(params[0].grad_sample)
        for p in params:
            rows = p.grad_sample
            pad = torch.zeros((drawn.size, *rows.shape[1:]), dtype=rows.dtype)
            p.grad_sample = torch.cat([rows, pad])
        canary = torch.zeros((batch + drawn.size, self.m), dtype=self.param.dtype)
        canary[batch + np.arange(drawn.size), drawn] = self.clip
        self.param.grad_sample = canary  # type: ignore[attr-defined]
        return self._pre_step_fn(closure)

    def _add_noise(self) -> None:
        self._noise_fn()
        grad: Any = self.param.grad
        values = grad.detach().cpu().numpy().astype(np.float64).reshape(-1)
        scale = self.noise_multiplier * self.clip  # as declared at attach time
        self.steps.append(NoisyStep("gaussian", scale, self.clip, self.rate, values.copy()))

    def audit(
        self, deltas: Sequence[float] = (1e-5,), alpha: float = 0.05, *, score: str = "llr"
    ) -> OneRunResult:
        """The estimators at each delta beside the certified bracket of what was declared
        (``score``: the per-step likelihood ratio ``llr`` or the ``sum`` of coordinates)."""
        if not 0 < alpha < 1:
            raise InvalidParameterError("alpha", f"must lie in (0, 1), got {alpha!r}", "0.05")
        scores = canary_scores(self.steps, self.m, score)
        step = PoissonSampledEvent(self.rate, GaussianEvent(self.noise_multiplier))
        event = SelfComposedEvent(step, len(self.steps))
        level = float(alpha) / len(deltas)
        rows = tuple(
            delta_row(event, Adjacency(), scores, self.included, float(d), level) for d in deltas
        )
        n_in = int(self.included.sum())
        return OneRunResult("opacus", "white-box", score, self.m, n_in, None, float(alpha), rows)

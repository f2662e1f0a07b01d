"""Checks of an Opacus run against what its accounting assumes, at attach time and every step.

Each finding names its cause and the fix. A *refused* construction raises (one line); a
*flagged* one is printed beside the bound, and when it breaks an assumption of the bound
(``voids``) the bound is said not to cover the run; a *noted* one is printed only.

=========================  ===========  ========================================================
cause                      severity     what is checked
=========================  ===========  ========================================================
``private_normaliser``     flagged,     under add/remove (Poisson sampling) the summed gradient
                           voids        is divided by ``expected_batch_size``, which Opacus's
                                        ``make_private`` derives from the dataset size (private
                                        under add/remove); unless declared public
``adaptive_normaliser``    flagged,     ``AdaClipDPOptimizer`` divides the noisy unclipped count
                           voids        by the batch's actual size (private under add/remove)
``normaliser_changed``     flagged,     ``expected_batch_size`` changed during the run
                           voids
``sampling_rate``          flagged      the sampler includes a record with a larger
                                        probability than Opacus books (Opacus's figure
                                        under-states the run; dpledger's uses the sampler's)
``sampler_replaced``       flagged      ``make_private`` replaced the loader's own sampler
                                        (e.g. a ``WeightedRandomSampler``) by Poisson sampling
``clipping_not_applied``   flagged,     the clipped sum differs from the sum of the per-sample
                           voids        gradients clipped to the norm (ghost clipping: the
                                        per-sample norms were not computed for the step)
``clip_norm_mismatch``     flagged,     ghost clipping: the module clips at another norm than the
                           voids        optimizer's noise is scaled to
``accumulated_batches``    flagged      a noisy step summed several logical batches (Opacus books
                                        one): accounted by dpledger, Opacus's figure
                                        under-states the run
``noise_changed``,         noted        the noise multiplier or clipping norm changed mid-run:
``clip_norm_changed``                   each step is accounted at its own multiplier
``secure_rng_off``         noted        Opacus's secure mode is off
=========================  ===========  ========================================================

Refused at attach: distributed training without Poisson sampling, an optimizer that is not a
``DPOptimizer`` (or a sharded one), a model without per-sample gradients, a declared public
normaliser that is not the optimizer's.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.integrations.opacus_events import POISSON, Batching
from dpledger.integrations.opacus_samplers import RATE_TOLERANCE

__all__ = [
    "ClipWatch",
    "Finding",
    "StepMonitor",
    "attach_findings",
    "check_module",
    "check_optimizer",
    "finding_lines",
]

REFUSED, FLAGGED, NOTED = "refused", "flagged", "noted"
#: relative tolerance of the clipped-sum comparison (float32 sums)
CLIP_TOLERANCE = 1e-3


@attrs.frozen
class Finding:
    """One departure of the run from what its accounting assumes."""

    cause: str
    severity: str
    message: str
    fix: str
    #: the noisy step (from 1) it was seen at; None: at attach time
    step: int | None = None
    #: the certified bound does not cover a run with this departure
    voids: bool = False

    def line(self) -> str:
        at = "" if self.step is None else f" at step {self.step}"
        return f"{self.severity} [{self.cause}]{at}: {self.message}; fix: {self.fix}"

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def finding_lines(findings: tuple[Finding, ...]) -> list[str]:
    """The summary's lines: the flags first, then the notes."""
    order = {REFUSED: 0, FLAGGED: 1, NOTED: 2}
    return [f.line() for f in sorted(findings, key=lambda f: order[f.severity])]


# ---------------------------------------------------------------------------------------------
# at attach time
# ---------------------------------------------------------------------------------------------
def check_optimizer(optimizer: Any, batching: Batching) -> None:
    """Refuse an optimizer the tracker cannot account, and distributed training without Poisson
    sampling; one line naming the fix."""
    from opacus.optimizers import DPOptimizer

    if not isinstance(optimizer, DPOptimizer):
        raise InvalidParameterError(
            "optimizer",
            f"is a {type(optimizer).__name__}, not an Opacus DPOptimizer",
            "pass the optimizer that privacy_engine.make_private returned",
        )
    name = type(optimizer).__name__
    if "FSDP" in name:
        raise UnsupportedEventError(
            f"{name} (sharded training) is not tracked; train with DPDDP and Opacus's "
            "distributed Poisson sampling"
        )
    if "Distributed" in name and (batching.kind != POISSON or batching.world_size < 2):
        raise UnsupportedEventError(
            f"distributed training ({name}) without Opacus's distributed Poisson sampler: "
            "each rank's batches are not a Poisson sample of the dataset and no theorem covers "
            "the run as Opacus accounts it; fix: make_private(..., poisson_sampling=True) on "
            "the DPDDP-wrapped model"
        )


def check_module(module: Any) -> None:
    """Refuse a model that computes no per-sample gradients; one line naming the fix."""
    from opacus.grad_sample import AbstractGradSampleModule

    if module is not None and not isinstance(module, AbstractGradSampleModule):
        raise InvalidParameterError(
            "module",
            f"is a {type(module).__name__}, which computes no per-sample gradients",
            "pass the model privacy_engine.make_private returned (a GradSampleModule)",
        )


def attach_findings(
    engine: Any,
    optimizer: Any,
    loader: Any,
    batching: Batching,
    *,
    public_normaliser: float | None = None,
    source_loader: Any = None,
    module: Any = None,
) -> list[Finding]:
    """What is seen before the first step."""
    found = _normaliser(optimizer, loader, batching, public_normaliser)
    found += _declared_derived(loader, batching, public_normaliser, source_loader)
    found += _untracked_parameters(module, optimizer)
    found += _rates(loader, batching, source_loader)
    count = getattr(optimizer, "unclipped_num_std", None)
    if count is not None:
        found.append(_adaptive_count(float(optimizer.noise_multiplier), float(count)))
    if not bool(getattr(engine, "secure_mode", False)):
        found.append(
            Finding(
                "secure_rng_off",
                NOTED,
                "Opacus's secure mode is off: the noise comes from torch's default generator, "
                "not a cryptographically secure one (the bound assumes exact Gaussian noise)",
                "PrivacyEngine(secure_mode=True) for a release (needs torchcsprng)",
            )
        )
    return found


def _adaptive_count(sigma: float, count: float) -> Finding:
    return Finding(
        "adaptive_count",
        NOTED,
        f"adaptive clipping releases the count of unclipped records with noise of standard "
        f"deviation {count:g} beside the gradient sum, on the same batch; a record added or "
        "removed changes the count by one, so dpledger accounts the pair as one Gaussian "
        "release whose multiplier combines both; Opacus books the multiplier "
        f"{sigma:g} alone (its Theorem 1 takes the count's sensitivity as 1/2)",
        "none needed: read dpledger's bound",
    )


def _derived_normaliser(loader: Any, world_size: int) -> float | None:
    """Opacus's ``int(len(dataset) / len(data_loader))``, per rank when distributed."""
    try:
        derived = int(len(loader.dataset) * (1 / len(loader)))
    except (TypeError, ZeroDivisionError):
        return None
    return derived / world_size if world_size > 1 else derived


def _normaliser(
    optimizer: Any, loader: Any, batching: Batching, public: float | None
) -> list[Finding]:
    divisor = getattr(optimizer, "expected_batch_size", None)
    mean = getattr(optimizer, "loss_reduction", "mean") == "mean"
    if public is not None and (not mean or divisor is None or float(divisor) != float(public)):
        raise InvalidParameterError(
            "public_normaliser",
            f"is {public!r} but the optimizer divides by {divisor!r} "
            f"(loss_reduction={getattr(optimizer, 'loss_reduction', None)!r})",
            "set optimizer.expected_batch_size to the public number and pass the same number",
        )
    found = []
    if not batching.size_public and mean and public is None:
        derived = divisor == _derived_normaliser(loader, batching.world_size)
        origin = (
            f"int(q * len(dataset)) = {divisor}"
            + (" (per rank)" if batching.world_size > 1 else "")
            + ", derived by make_private from the dataset size"
            if derived
            else f"{divisor}, of undeclared origin"
        )
        found.append(
            Finding(
                "private_normaliser",
                FLAGGED,
                f"the noisy gradient sum is divided by expected_batch_size = {origin}; under "
                "add/remove adjacency the dataset size is private, and the bound holds only "
                "for a public divisor",
                "fix a public normaliser: set optimizer.expected_batch_size to a public number "
                "(e.g. the batch size you chose) and pass it as public_normaliser=",
                voids=True,
            )
        )
    if not batching.size_public and _adaclip_default_update(optimizer):
        found.append(
            Finding(
                "adaptive_normaliser",
                FLAGGED,
                "AdaClipDPOptimizer divides the noisy unclipped count by the batch's actual "
                "size (sample_size), which is private under Poisson sampling; the next "
                "clipping norm, and the noise scaled to it, depend on it",
                "override update_max_grad_norm to divide by the public expected batch size",
                voids=True,
            )
        )
    return found


def _declared_derived(
    loader: Any, batching: Batching, public: float | None, source: Any
) -> list[Finding]:
    """A normaliser declared public that is the number make_private derives from the dataset
    size, where the loader given to make_private had another batch size (the public choice):
    the optimizer's ``expected_batch_size`` passed on as public."""
    derived = _derived_normaliser(loader, batching.world_size)
    chosen = getattr(source, "batch_size", None)
    if public is None or batching.size_public or derived is None or float(public) != derived:
        return []
    if chosen is None or float(chosen) == float(public):
        return []  # no public choice to tell it from, or the batch size chosen for the loader
    return [
        Finding(
            "private_normaliser",
            FLAGGED,
            f"the normaliser declared public, {public}, is int(len(dataset) / len(data_loader)), "
            "the number make_private derives from the dataset size (private under add/remove), "
            f"not the batch size {chosen} the data loader was given",
            "declare a number fixed without the dataset size (e.g. the batch size you chose) "
            "and set optimizer.expected_batch_size to it",
            voids=True,
        )
    ]


def _untracked_parameters(module: Any, optimizer: Any) -> list[Finding]:
    """Trainable parameters of the model that the DP optimizer does not update (another
    optimizer may train them on unclipped, unnoised gradients)."""
    if module is None:
        return []
    tracked = {id(p) for p in optimizer.params}
    missing = [n for n, p in module.named_parameters() if p.requires_grad and id(p) not in tracked]
    if not missing:
        return []
    return [
        Finding(
            "parameters_outside_optimizer",
            FLAGGED,
            f"{len(missing)} trainable parameters of the model ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}) are not in the DP optimizer: whatever "
            "updates them is not clipped, noised or accounted",
            "give every trainable parameter to the optimizer passed to make_private, or set "
            "requires_grad=False on the frozen ones",
            voids=True,
        )
    ]


def _adaclip_default_update(optimizer: Any) -> bool:
    from opacus.optimizers import AdaClipDPOptimizer

    return (
        isinstance(optimizer, AdaClipDPOptimizer)
        and type(optimizer).update_max_grad_norm is AdaClipDPOptimizer.update_max_grad_norm
    )


def _rates(loader: Any, batching: Batching, source_loader: Any) -> list[Finding]:
    found = []
    booked = 1 / len(loader) if len(loader) else None
    real = batching.inclusion_rate
    close = booked is not None and real is not None and abs(real - booked) <= RATE_TOLERANCE
    if booked is not None and real is not None and not close:
        worse = real > booked
        found.append(
            Finding(
                "sampling_rate",
                FLAGGED if worse else NOTED,
                f"Opacus books a sampling rate q = 1/len(data_loader) = {booked:.6g}; the "
                f"sampler includes a record in a batch with probability up to {real:.6g}"
                + (": Opacus's figure under-states the run" if worse else "")
                + "; dpledger accounts the sampler's rate",
                "read the bound dpledger prints, not Opacus's"
                if worse
                else "none needed (Opacus's figure is the looser one)",
            )
        )
    replaced = _replaced_sampler(loader, source_loader, batching)
    if replaced:
        found.append(replaced)
    return found


def _replaced_sampler(loader: Any, source: Any, batching: Batching) -> Finding | None:
    from torch.utils.data import RandomSampler, SequentialSampler

    if source is None or source is loader or batching.kind != POISSON:
        return None
    sampler = getattr(source, "sampler", None)
    if sampler is None or isinstance(sampler, RandomSampler | SequentialSampler):
        return None
    q = batching.sample_rate or 0.0
    return Finding(
        "sampler_replaced",
        FLAGGED,
        f"make_private replaced the data loader's {type(sampler).__name__} by Poisson "
        f"sampling at q = {q:.6g}: its weights are ignored and each of the "
        f"{batching.dataset_size} records joins each batch with probability q (expected "
        f"batch {q * batching.dataset_size:.6g}; the loader drew batches of "
        f"{getattr(source, 'batch_size', None)})",
        "pass poisson_sampling=False to keep the sampler (dpledger accounts it through its "
        "inclusion rates), or use dpledger's WeightedPoissonSampler",
    )


# ---------------------------------------------------------------------------------------------
# at every step
# ---------------------------------------------------------------------------------------------
class StepMonitor:
    """Compares each noisy step's parameters with the first one's."""

    def __init__(self, optimizer: Any, module: Any = None) -> None:
        self.module = module
        self.first: dict[str, Any] = {}
        self.seen: set[str] = set()
        self.findings: list[Finding] = []
        self._norms: Any = None
        self.ghost = "FastGradientClipping" in type(optimizer).__name__

    def check(self, optimizer: Any, step: int, batches: int = 1) -> None:
        values = {
            "noise_changed": float(optimizer.noise_multiplier),
            "clip_norm_changed": _norm(optimizer.max_grad_norm),
            "normaliser_changed": getattr(optimizer, "expected_batch_size", None),
        }
        if not self.first:
            self.first = values
        for cause, value in values.items():
            if value != self.first[cause] and cause not in self.seen:
                self._changed(cause, self.first[cause], value, step, optimizer)
        if self.ghost:
            self._ghost(optimizer, step)
        if batches > 1:
            self._add(
                Finding(
                    "accumulated_batches",
                    FLAGGED,
                    f"the noisy step summed {batches} logical batches under one noise draw; "
                    "Opacus's accountant books one batch per noisy step, so its figure "
                    f"under-states the run; dpledger accounts the {batches} batches",
                    "take one noisy step per logical batch (Opacus's BatchMemoryManager splits "
                    "a large one), or read dpledger's bound",
                    step,
                )
            )

    def fresh_norms(self) -> bool:
        """Ghost clipping: whether per-sample norms were computed since the last noisy step
        (a backward pass of the DP loss); True when the module is unknown."""
        if self.module is None:
            return True
        norms = getattr(self.module, "_per_sample_gradient_norms", None)
        return norms is not None and norms is not self._norms

    def _add(self, finding: Finding) -> None:
        if finding.cause not in self.seen:
            self.seen.add(finding.cause)
            self.findings.append(finding)

    def _changed(self, cause: str, old: Any, new: Any, step: int, optimizer: Any) -> None:
        from opacus.optimizers import AdaClipDPOptimizer

        if cause == "clip_norm_changed" and isinstance(optimizer, AdaClipDPOptimizer):
            return  # adaptive clipping changes it by design; its cost is accounted
        what = {
            "noise_changed": "noise multiplier",
            "clip_norm_changed": "clipping norm",
            "normaliser_changed": "gradient normaliser expected_batch_size",
        }[cause]
        voids = cause == "normaliser_changed"
        self._add(
            Finding(
                cause,
                FLAGGED if voids else NOTED,
                f"the {what} changed from {old} to {new}"
                + (
                    ": a divisor that moves during the run is not a public constant"
                    if voids
                    else "; each step is accounted at its own multiplier, valid when the "
                    "schedule was fixed before training, not chosen from the data"
                ),
                "keep it constant" if voids else "fix the schedule in advance",
                step,
                voids,
            )
        )

    def _ghost(self, optimizer: Any, step: int) -> None:
        module = self.module
        if module is None or not hasattr(module, "_per_sample_gradient_norms"):
            self._add(
                Finding(
                    "clipping_unchecked",
                    NOTED,
                    "ghost clipping happens in the model; without it the tracker cannot check it",
                    "pass module= to OpacusTracker.attach (make_private of dpledger does)",
                    step,
                )
            )
            return
        if float(module.max_grad_norm) != _norm(optimizer.max_grad_norm):
            self._add(_ghost_mismatch(module.max_grad_norm, optimizer.max_grad_norm, step))
        norms = module._per_sample_gradient_norms
        if norms is None or norms is self._norms:
            self._add(
                Finding(
                    "clipping_not_applied",
                    FLAGGED,
                    "ghost clipping: no per-sample gradient norms were computed for this step, "
                    "so the gradient was not clipped per sample (the loss was not the DP loss)",
                    "call backward on the criterion make_private returned with "
                    "grad_sample_mode='ghost'",
                    step,
                    True,
                )
            )
        self._norms = norms


def _ghost_mismatch(module_norm: Any, optimizer_norm: Any, step: int) -> Finding:
    return Finding(
        "clip_norm_mismatch",
        FLAGGED,
        f"ghost clipping clips at the module's max_grad_norm {module_norm} but the noise is "
        f"scaled to the optimizer's {optimizer_norm}",
        "change both together (module.max_grad_norm and optimizer.max_grad_norm)",
        step,
        True,
    )


def _norm(value: Any) -> Any:
    return tuple(float(c) for c in value) if isinstance(value, list | tuple) else float(value)


class ClipWatch:
    """Wraps the optimizer's ``clip_and_accumulate``: the summed increment must be the sum of
    the per-sample gradients each scaled to norm at most ``max_grad_norm``."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.original = optimizer.clip_and_accumulate
        self.finding: Finding | None = None
        self.steps = 0
        #: per-sample gradients clipped since the last noisy step
        self.rows = 0

    def install(self) -> None:
        self.optimizer.clip_and_accumulate = self._checked

    def remove(self) -> None:
        if self.installed:
            self.optimizer.__dict__.pop("clip_and_accumulate", None)

    @property
    def installed(self) -> bool:
        return bool(self.optimizer.__dict__.get("clip_and_accumulate") == self._checked)

    def verify(self, step: int) -> None:
        """Flag a clipping function replaced after attach (it cannot be checked)."""
        if self.finding is None and not self.installed:
            self.finding = Finding(
                "clipping_not_applied",
                FLAGGED,
                "the optimizer's clip_and_accumulate was replaced after the tracker was "
                "attached: per-sample clipping cannot be checked and is not assumed",
                "attach the tracker after any change to the optimizer, and keep Opacus's "
                "per-sample clipping",
                step,
                True,
            )

    def take_rows(self) -> int:
        """The per-sample gradients clipped for the noisy step that just ran."""
        rows, self.rows = self.rows, 0
        return rows

    def _checked(self) -> None:
        optimizer = self.optimizer
        samples = optimizer.grad_samples
        self.rows += len(samples[0]) if samples else 0
        if isinstance(optimizer.max_grad_norm, list | tuple):
            self.original()  # per-layer clipping: not checked here
            return
        expected = _clipped_sum(optimizer)
        before = [
            None if p.summed_grad is None else p.summed_grad.clone() for p in optimizer.params
        ]
        self.original()
        if expected is None or self.finding is not None:
            return
        error, scale = _distance(optimizer.params, before, expected)
        if error > CLIP_TOLERANCE * (scale + float(optimizer.max_grad_norm)):
            self.finding = Finding(
                "clipping_not_applied",
                FLAGGED,
                "the clipped gradient sum differs from the sum of the per-sample gradients "
                f"clipped to {float(optimizer.max_grad_norm):g} (distance {error:.3g}, sum norm "
                f"{scale:.3g}): per-sample clipping was not applied",
                "use Opacus's DPOptimizer clipping (do not override clip_and_accumulate)",
                None,
                True,
            )


def _clipped_sum(optimizer: Any) -> list[Any] | None:
    import torch

    samples = optimizer.grad_samples
    if not samples or len(samples[0]) == 0:
        return None
    norms = torch.stack([g.reshape(len(g), -1).norm(2, dim=-1) for g in samples], dim=1)
    factor = (float(optimizer.max_grad_norm) / (norms.norm(2, dim=1) + 1e-6)).clamp(max=1.0)
    return [torch.einsum("i,i...", factor.to(g.dtype), g) for g in samples]


def _distance(params: list[Any], before: list[Any], expected: list[Any]) -> tuple[float, float]:
    error = scale = 0.0
    for p, b, e in zip(params, before, expected, strict=True):
        increment = p.summed_grad if b is None else p.summed_grad - b
        error += float((increment.reshape(e.shape) - e).pow(2).sum())
        scale += float(e.pow(2).sum())
    return math.sqrt(error), math.sqrt(scale)

"""White-box canaries: gradient canaries that enter a method's run through the ledger's data path.

:class:`CanaryLedger` stands between a method and its runtime ledger. Each of the ``m`` canaries
is a record of its own (included in the run's data or not, as the audit drew), whose
contribution to every noisy sum is a Dirac vector of the step's sensitivity in a coordinate of
its own, appended to the method's query (the threat model of Nasr et al. 2023: the adversary
chooses the canary's gradient and sees every noisy sum):

* ``poisson_sample(n, q)`` draws from the ``n`` records and the included canaries, through the
  runtime ledger (which books it); the method sees only its own records' indices;
* ``clipped_sum_gaussian`` / ``clipped_sum_laplace`` get one row per sampled canary, and
  ``gaussian`` / ``laplace`` (a query on the whole data) one coordinate per included canary;
  the runtime ledger clips, books and adds the noise to all of it; the method gets back its own
  coordinates, the audit keeps the canaries' (:class:`NoisyStep`).

Every other ledger call goes to the runtime ledger unchanged (canaries take no part in it). So
each canary's privacy is that of one record under the method's declaration, and every noisy
step the runtime ledger books is observed.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.core.errors import InvalidParameterError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
SCORES = ("llr", "sum")
#: the noise levels, relative to the declared one, the likelihood-ratio scores are computed at
LLR_FACTORS = (1.0, 0.5, 0.25)


@attrs.frozen
class NoisyStep:
    """The canaries' coordinates of one noisy step: ``values[i]`` is canary ``i``'s."""

    noise: str  # "gaussian" or "laplace"
    scale: float  # the noise's std (Gaussian) or scale (Laplace)
    sensitivity: float  # what an included, sampled canary adds to its coordinate
    rate: float  # the probability an included canary took part (1 outside a sample)
    values: FloatArray


class _CanarySample:
    """A sample scope of the runtime ledger whose ``indices`` are the method's records only."""

    def __init__(
        self, owner: CanaryLedger, scope: Any, n: int, rate: float, pool: IntArray
    ) -> None:
        self._owner, self._scope, self.rate = owner, scope, rate
        raw = np.asarray(scope.indices, dtype=np.int64)
        self.indices: IntArray = raw[raw < n]
        self.canaries: IntArray = pool[raw[raw >= n] - n]

    @property
    def step(self) -> str:
        return str(self._scope.step)

    def __len__(self) -> int:
        return int(self.indices.size)

    def __enter__(self) -> _CanarySample:
        self._scope.__enter__()
        self._owner.samples.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._owner.samples.remove(self)
        self._scope.__exit__(*exc)


class CanaryLedger:
    """The ledger a method runs under in a white-box one-run audit (see the module)."""

    def __init__(self, ledger: Any, included: Any) -> None:
        self._ledger = ledger
        self.included = np.asarray(included, dtype=bool).reshape(-1)
        self.m = int(self.included.size)
        self.included_ids: IntArray = np.flatnonzero(self.included).astype(np.int64)
        self.samples: list[_CanarySample] = []
        self.steps: list[NoisyStep] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)

    def _refuse(self, call: str) -> None:
        raise InvalidParameterError(
            "--one-run",
            f"the method draws with ledger.{call}, which white-box canaries do not follow "
            "(they follow Poisson samples and noisy sums)",
            "audit it with several runs instead (drop --one-run)",
        )

    def sample_without_replacement(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("sample_without_replacement")

    def shuffle_batches(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("shuffle_batches")

    def allocate(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("allocate")

    def poisson_sample(self, n: int, q: float, *, step: str) -> _CanarySample:
        if self._ledger.units is not None:
            raise InvalidParameterError(
                "--one-run",
                "the method samples privacy units its ledger reads from the data's unit keys, "
                "and canaries carry none",
                "audit it with several runs instead (drop --one-run)",
            )
        # a sample drawn inside another draws from the canaries that one holds
        pool = self.samples[-1].canaries if self.samples else self.included_ids
        scope = self._ledger.poisson_sample(int(n) + pool.size, q, step=step)
        return _CanarySample(self, scope, int(n), float(q), pool)

    def _active(self) -> tuple[IntArray, float]:
        """The canaries taking part in a step now, and the rate they were drawn at."""
        if self.samples:
            inner = self.samples[-1]
            rate = float(np.prod([s.rate for s in self.samples]))
            return inner.canaries, rate
        return self.included_ids, 1.0

    def _sum(self, call: str, contributions: Any, clip: float, mult: float, kw: Any) -> Any:
        rows = np.asarray(contributions, dtype=np.float64)
        if rows.ndim != 2:
            raise InvalidParameterError(
                "--one-run",
                f"ledger.{call} got contributions of shape {rows.shape}; white-box canaries "
                "need one row per record",
                "pass a (records, dims) array, or drop --one-run",
            )
        active, rate = self._active()
        b, d = rows.shape
        ext = np.zeros((b + active.size, d + self.m))
        ext[:b, :d] = rows
        ext[b + np.arange(active.size), d + active] = clip
        noisy = np.asarray(getattr(self._ledger, call)(ext, clip, mult, **kw), dtype=np.float64)
        noise = "gaussian" if call.endswith("gaussian") else "laplace"
        self.steps.append(NoisyStep(noise, mult * clip, clip, rate, noisy[d:].copy()))
        return noisy[:d]

    def clipped_sum_gaussian(
        self, contributions: Any, clip_norm: float, noise_multiplier: float, **kw: Any
    ) -> Any:
        return self._sum("clipped_sum_gaussian", contributions, clip_norm, noise_multiplier, kw)

    def clipped_sum_laplace(
        self, contributions: Any, clip_norm: float, noise_multiplier: float, **kw: Any
    ) -> Any:
        return self._sum("clipped_sum_laplace", contributions, clip_norm, noise_multiplier, kw)

    def _query(self, call: str, values: Any, sensitivity: float, mult: float, kw: Any) -> Any:
        arr = np.asarray(values, dtype=np.float64)
        active, rate = self._active()
        extra = np.zeros(self.m)
        extra[active] = sensitivity
        ext = np.concatenate([arr.reshape(-1), extra])
        noisy = np.asarray(getattr(self._ledger, call)(ext, sensitivity, mult, **kw))
        self.steps.append(
            NoisyStep(call, mult * sensitivity, sensitivity, rate, noisy[arr.size :].copy())
        )
        own = noisy[: arr.size].reshape(arr.shape)
        return float(own) if own.ndim == 0 else own

    def gaussian(self, values: Any, sensitivity: float, noise_multiplier: float, **kw: Any) -> Any:
        return self._query("gaussian", values, sensitivity, noise_multiplier, kw)

    def laplace(self, values: Any, sensitivity: float, noise_multiplier: float, **kw: Any) -> Any:
        return self._query("laplace", values, sensitivity, noise_multiplier, kw)


def _step_llr(step: NoisyStep, factor: float = 1.0) -> FloatArray:
    """Log-likelihood ratio of "the canary took part" against "it did not", per canary, for
    noise of ``factor`` times the step's scale."""
    x, s, b = step.values, step.sensitivity, step.scale * factor
    if step.noise == "gaussian":
        loss = (x * s - 0.5 * s * s) / (b * b)
    else:
        loss = (np.abs(x) - np.abs(x - s)) / b
    if step.rate >= 1.0:
        return np.asarray(loss, dtype=np.float64)
    # log(1 - q + q e^loss), stable for large losses
    q = step.rate
    return np.asarray(np.logaddexp(np.log1p(-q), np.log(q) + loss), dtype=np.float64)


def canary_scores(steps: list[NoisyStep], m: int, score: str = "llr") -> FloatArray:
    """Scores of the canaries over every observed step, one row per score: ``"sum"`` adds each
    canary's coordinate of every noisy sum (over the step's sensitivity); ``"llr"`` adds each
    step's log-likelihood ratio of inclusion, at the declared noise (the optimal test if the
    noise is as declared; a sampled step's mixture included) and at each smaller noise of
    :data:`LLR_FACTORS` (the optimal tests should the noise be that much smaller)."""
    if score not in SCORES:
        raise InvalidParameterError("score", f"unknown score {score!r}", "use llr or sum")
    if not steps:
        raise InvalidParameterError(
            "--one-run",
            "the method drew no noisy sum or noisy query the canaries could be observed in",
            "audit it with several runs instead (drop --one-run)",
        )
    if score == "sum":
        total = np.sum([s.values / s.sensitivity for s in steps], axis=0)
        return np.asarray(total, dtype=np.float64).reshape(1, m)
    rows = [np.sum([_step_llr(s, f) for s in steps], axis=0) for f in LLR_FACTORS]
    return np.asarray(rows, dtype=np.float64).reshape(len(LLR_FACTORS), m)

"""The noise and sampling interface of the trajectory method.

Every random draw of a run goes through an object with two methods::

    gaussian(shape, std, step) -> np.ndarray      # i.i.d. N(0, std^2), float64
    poisson_sample(n, q, step) -> np.ndarray      # bool mask: each of n records kept w.p. q

so that a runtime ledger can be plugged in. Step labels: ``t{i}/warm/...`` (warm-start
releases), ``t{i}/p{phase}/k{iter}/sample`` and ``.../noise`` (private particle steps), and
labels starting with ``public/`` for data-independent randomness (Langevin top-up diffusion,
public initialisation, spreading released means), which carries no privacy cost.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

import attrs
import numpy as np
from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)

PUBLIC_PREFIX = "public/"


class NoiseSource(Protocol):
    """What the method needs from a noise provider."""

    def gaussian(self, shape: tuple[int, ...], std: float, step: str) -> np.ndarray: ...

    def poisson_sample(self, n: int, q: float, step: str) -> np.ndarray: ...


@attrs.frozen
class NoiseCall:
    """One recorded draw: ``kind`` is ``"gaussian"`` (``param`` = std) or ``"poisson"``
    (``param`` = q, ``size`` = n)."""

    kind: str
    step: str
    param: float
    size: int

    @property
    def public(self) -> bool:
        return self.step.startswith(PUBLIC_PREFIX)


class RecordingNoise:
    """Default noise source: a seeded numpy ``Generator`` that records every call.

    Not a cryptographically secure sampler; floating-point Gaussian noise (idealised numerics).
    """

    def __init__(self, seed: int | None = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.calls: list[NoiseCall] = []

    def gaussian(self, shape: tuple[int, ...], std: float, step: str) -> np.ndarray:
        if not (std >= 0 and np.isfinite(std)):
            raise InvalidParameterError("std", f"got {std!r}", "pass a finite std >= 0")
        shape = tuple(int(s) for s in shape)
        self.calls.append(NoiseCall("gaussian", step, float(std), int(np.prod(shape))))
        return std * self.rng.standard_normal(shape)

    def poisson_sample(self, n: int, q: float, step: str) -> np.ndarray:
        if not (0.0 <= q <= 1.0):
            raise InvalidParameterError("q", f"got {q!r}", "pass a rate in [0, 1]")
        self.calls.append(NoiseCall("poisson", step, float(q), int(n)))
        return self.rng.random(int(n)) < q

    def private_calls(self) -> list[NoiseCall]:
        return [c for c in self.calls if not c.public]


def summarise_private_calls(calls: list[NoiseCall]) -> dict[int, Counter[tuple[str, str, float]]]:
    """Per marginal, a multiset of (release, kind, param) of the privacy-relevant draws.

    ``release`` is ``"warm"`` or ``"step"``; for step noise ``param`` is the std.
    """
    out: dict[int, Counter[tuple[str, str, float]]] = {}
    for c in calls:
        if c.public:
            continue
        head, _, rest = c.step.partition("/")
        if not head.startswith("t"):
            raise InvalidParameterError("step", f"unparsable label {c.step!r}", "use t{i}/...")
        i = int(head[1:])
        release = "warm" if rest.startswith("warm") else "step"
        out.setdefault(i, Counter())[(release, c.kind, round(c.param, 12))] += 1
    return out


def executed_marginal_events(
    calls: list[NoiseCall], C: float, warm_contributions: dict[int, tuple[float, ...]]
) -> dict[int, Event]:
    """Rebuild, per marginal, the event that the recorded private draws actually executed.

    Warm-start Gaussian draws become ``GaussianEvent(std / contribution)`` (contributions in
    order); every ``sample`` + ``noise`` pair of a particle step becomes
    ``PoissonSampledEvent(q, GaussianEvent(std / C))``; consecutive equal steps are grouped into
    a :class:`SelfComposedEvent`. The result has the structure of
    :func:`dpledger.plugins.trajectories.declare.marginal_event`, so the two can be compared.
    """
    per: dict[int, list[NoiseCall]] = {}
    for c in calls:
        if not c.public:
            per.setdefault(int(c.step.partition("/")[0][1:]), []).append(c)
    out: dict[int, Event] = {}
    for i, cs in per.items():
        parts: list[Event] = []
        warm = [c for c in cs if c.step.partition("/")[2].startswith("warm")]
        contribs = warm_contributions.get(i, ())
        if len(warm) != len(contribs):
            raise LedgerViolationError(
                f"marginal {i}: {len(warm)} warm-start draws but {len(contribs)} contributions"
            )
        parts.extend(GaussianEvent(c.param / r) for c, r in zip(warm, contribs, strict=True))
        steps = [c for c in cs if c not in warm]
        run: list[Event] = []
        for j in range(0, len(steps), 2):
            pair = steps[j : j + 2]
            if len(pair) != 2 or pair[0].kind != "poisson" or pair[1].kind != "gaussian":
                raise LedgerViolationError(f"marginal {i}: step draws are not sample+noise pairs")
            run.append(PoissonSampledEvent(pair[0].param, GaussianEvent(pair[1].param / C)))
        j = 0
        while j < len(run):
            k = j
            while k < len(run) and run[k] == run[j]:
                k += 1
            parts.append(SelfComposedEvent(run[j], k - j))
            j = k
        out[i] = parts[0] if len(parts) == 1 else ComposedEvent(parts)
    return out

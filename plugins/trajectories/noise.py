"""The noise and sampling interface of the trajectory method.

Every random draw of a run goes through an object with three methods::

    public_normal(shape, step) -> np.ndarray
        standard normals for data-independent randomness (public initialisation, spreading a
        released mean, Langevin top-up diffusion); no privacy cost
    release(queries, scales, multiplier, steps) -> list[np.ndarray]
        ``queries[j] + N(0, (multiplier * scales[j])^2)`` for every slice ``j``, released together
    sampled_release(sizes, q, compute, scales, multiplier, steps) -> list[np.ndarray]
        Poisson-sample each of the ``sizes[j]`` records of slice ``j`` with probability ``q``,
        ``compute(indices)`` returns the queries on the samples, then ``release`` them

A *slice* is one time marginal; ``scales[j]`` is the L2 contribution bound of one person to
slice ``j``. One call is one release: when the slices are disjoint marginals and a person sits
in one of them (event level) the stacked query has contribution bound 1 after dividing every
slice by its scale, so one call is one :class:`GaussianEvent` (inside a Poisson sample). At user
level the method makes one call per marginal. ``steps[j]`` labels slice ``j``
(``t{i}/warm/...`` or ``t{i}/p{phase}/k{iter}``).

:class:`RecordingNoise` (seeded numpy, records the executed events), :class:`LedgerNoise`
(routes everything through a :class:`~dpledger.runtime.ledger.PrivacyLedger`) and
:class:`LegacyNoise` (adapts an object with the older ``gaussian(shape, std, step)`` /
``poisson_sample(n, q, step)`` pair, one ledger per marginal) implement it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from dpledger.plugin import (
    ComposedEvent,
    Event,
    GaussianEvent,
    InvalidParameterError,
    NoOpEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)

PUBLIC_PREFIX = "public/"

Compute = Callable[[list[np.ndarray]], list[np.ndarray]]


class NoiseSource(Protocol):
    """What the method needs from a noise provider."""

    def public_normal(self, shape: tuple[int, ...], step: str) -> np.ndarray: ...

    def release(
        self,
        queries: Sequence[np.ndarray],
        scales: Sequence[float],
        multiplier: float,
        steps: Sequence[str],
    ) -> list[np.ndarray]: ...

    def sampled_release(
        self,
        sizes: Sequence[int],
        q: float,
        compute: Compute,
        scales: Sequence[float],
        multiplier: float,
        steps: Sequence[str],
    ) -> list[np.ndarray]: ...


def marginal_of(step: str) -> int:
    """The marginal index of a ``t{i}/...`` label."""
    head = step.split("/", 1)[0]
    if not head.startswith("t") or not head[1:].isdigit():
        raise InvalidParameterError("step", f"unparsable label {step!r}", "use t{i}/...")
    return int(head[1:])


def _check(
    queries: Sequence[np.ndarray], scales: Sequence[float], multiplier: float, steps: Sequence[str]
) -> None:
    if not (len(queries) == len(scales) == len(steps)) or not queries:
        raise InvalidParameterError(
            "queries",
            "need one scale and one label per slice",
            "pass equally long, non-empty lists",
        )
    if not (multiplier > 0 and np.isfinite(multiplier)):
        raise InvalidParameterError("multiplier", f"got {multiplier!r}", "pass a multiplier > 0")
    for s in scales:
        if not (s > 0 and np.isfinite(s)):
            raise InvalidParameterError("scales", f"got {s!r}", "pass contribution bounds > 0")


def joint_step(steps: Sequence[str]) -> str:
    """One ledger label for a joint release: ``t0+t1+t2/p0/k3`` (the slices' common suffix)."""
    heads = [s.split("/", 1) for s in steps]
    tails = {h[1] if len(h) > 1 else "" for h in heads}
    tail = tails.pop() if len(tails) == 1 else "mixed"
    return "+".join(h[0] for h in heads) + (f"/{tail}" if tail else "")


def _sampled_queries(
    sizes: Sequence[int], q: float, compute: Compute, masks: Sequence[np.ndarray]
) -> list[np.ndarray]:
    if not (0.0 <= q <= 1.0):
        raise InvalidParameterError("q", f"got {q!r}", "pass a rate in [0, 1]")
    out = compute([np.flatnonzero(mk).astype(np.int64) for mk in masks])
    if len(out) != len(sizes):
        raise InvalidParameterError("compute", "must return one query per slice", "fix it")
    return [np.asarray(o, dtype=np.float64) for o in out]


@attrs.frozen
class Executed:
    """One executed release: the event, and the marginals (slices) it covered."""

    event: Event
    marginals: tuple[int, ...]
    step: str


class RecordingNoise:
    """Default noise source: a seeded numpy ``Generator`` that records every executed release.

    Not a cryptographically secure sampler; floating-point Gaussian noise (idealised numerics).
    """

    def __init__(self, seed: int | None = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.executed: list[Executed] = []
        self.public_draws: list[tuple[str, int]] = []

    def public_normal(self, shape: tuple[int, ...], step: str) -> np.ndarray:
        shape = tuple(int(s) for s in shape)
        self.public_draws.append((step, int(np.prod(shape))))
        return self.rng.standard_normal(shape)

    def _noise(
        self, queries: Sequence[np.ndarray], scales: Sequence[float], multiplier: float
    ) -> list[np.ndarray]:
        return [
            np.asarray(qy, dtype=np.float64)
            + (multiplier * s) * self.rng.standard_normal(np.shape(qy))
            for qy, s in zip(queries, scales, strict=True)
        ]

    def release(
        self,
        queries: Sequence[np.ndarray],
        scales: Sequence[float],
        multiplier: float,
        steps: Sequence[str],
    ) -> list[np.ndarray]:
        _check(queries, scales, multiplier, steps)
        self.executed.append(
            Executed(
                GaussianEvent(multiplier), tuple(marginal_of(s) for s in steps), joint_step(steps)
            )
        )
        return self._noise(queries, scales, multiplier)

    def sampled_release(
        self,
        sizes: Sequence[int],
        q: float,
        compute: Compute,
        scales: Sequence[float],
        multiplier: float,
        steps: Sequence[str],
    ) -> list[np.ndarray]:
        masks = [self.rng.random(int(n)) < q for n in sizes]
        queries = _sampled_queries(sizes, q, compute, masks)
        _check(queries, scales, multiplier, steps)
        self.executed.append(
            Executed(
                PoissonSampledEvent(float(q), GaussianEvent(multiplier)),
                tuple(marginal_of(s) for s in steps),
                joint_step(steps),
            )
        )
        return self._noise(queries, scales, multiplier)

    def executed_event(self) -> Event:
        """Every release in order, as one event (runs of equal releases grouped)."""
        return group_runs([e.event for e in self.executed])


def group_runs(events: Sequence[Event]) -> Event:
    """Compose ``events`` in order, grouping consecutive equal ones into SelfComposedEvent."""
    parts: list[Event] = []
    j = 0
    while j < len(events):
        k = j
        while k < len(events) and events[k] == events[j]:
            k += 1
        parts.append(events[j] if k - j == 1 else SelfComposedEvent(events[j], k - j))
        j = k
    if not parts:
        return NoOpEvent()
    return parts[0] if len(parts) == 1 else ComposedEvent(parts)


def executed_marginal_events(executed: Sequence[Executed]) -> dict[int, Event]:
    """Per marginal, the composition of the releases that covered it (in order).

    The result has the structure of
    :func:`dpledger.plugins.trajectories.declare.marginal_event`, so the two can be compared.
    """
    per: dict[int, list[Event]] = {}
    for e in executed:
        for i in e.marginals:
            per.setdefault(i, []).append(e.event)
    out: dict[int, Event] = {}
    for i, evs in per.items():
        warm = [e for e in evs if isinstance(e, GaussianEvent)]
        rest = [e for e in evs if not isinstance(e, GaussianEvent)]
        grouped = group_runs(rest)
        parts = [*warm, *(grouped.events if isinstance(grouped, ComposedEvent) else [grouped])]
        parts = [p for p in parts if not isinstance(p, NoOpEvent)]
        wrapped = [
            p if isinstance(p, GaussianEvent | SelfComposedEvent) else SelfComposedEvent(p, 1)
            for p in parts
        ]
        out[i] = wrapped[0] if len(wrapped) == 1 else ComposedEvent(wrapped)
    return out


class LedgerNoise:
    """Routes every private draw through a runtime :class:`~dpledger.runtime.ledger.PrivacyLedger`.

    A release of slices with scales ``s_j`` is booked as one ``ledger.gaussian`` call on the
    stacked query ``[q_j / s_j]`` with contribution bound 1 and the noise multiplier as given
    (so the booked multiplier is exactly the declared one); the noise is scaled back per slice.
    A sampled release opens one ``ledger.poisson_sample`` over all slices' records (each record
    kept independently with probability ``q``: the same law as one Poisson sample per slice)
    around that call. Public draws use ``public_rng``, never the ledger's generator.
    """

    def __init__(self, ledger: Any, public_rng: np.random.Generator) -> None:
        self.ledger = ledger
        self.public_rng = public_rng

    def public_normal(self, shape: tuple[int, ...], step: str) -> np.ndarray:
        return self.public_rng.standard_normal(tuple(int(s) for s in shape))

    def _stacked(
        self, queries: Sequence[np.ndarray], scales: Sequence[float], multiplier: float, step: str
    ) -> list[np.ndarray]:
        arrs = [np.asarray(qy, dtype=np.float64) for qy in queries]
        flat = np.concatenate([(a / s).ravel() for a, s in zip(arrs, scales, strict=True)])
        noisy = np.atleast_1d(np.asarray(self.ledger.gaussian(flat, 1.0, multiplier, step=step)))
        out, k = [], 0
        for a, s in zip(arrs, scales, strict=True):
            out.append(s * noisy[k : k + a.size].reshape(a.shape))
            k += a.size
        return out

    def release(
        self,
        queries: Sequence[np.ndarray],
        scales: Sequence[float],
        multiplier: float,
        steps: Sequence[str],
    ) -> list[np.ndarray]:
        _check(queries, scales, multiplier, steps)
        return self._stacked(queries, scales, multiplier, joint_step(steps))

    def sampled_release(
        self,
        sizes: Sequence[int],
        q: float,
        compute: Compute,
        scales: Sequence[float],
        multiplier: float,
        steps: Sequence[str],
    ) -> list[np.ndarray]:
        name = joint_step(steps)
        offsets = np.cumsum([0, *[int(n) for n in sizes]])
        with self.ledger.poisson_sample(int(offsets[-1]), float(q), step=f"{name}/sample") as smp:
            masks = []
            for j in range(len(sizes)):
                mk = np.zeros(int(sizes[j]), dtype=bool)
                sel = smp.indices[(smp.indices >= offsets[j]) & (smp.indices < offsets[j + 1])]
                mk[sel - offsets[j]] = True
                masks.append(mk)
            queries = _sampled_queries(sizes, q, compute, masks)
            _check(queries, scales, multiplier, steps)
            return self._stacked(queries, scales, multiplier, f"{name}/noise")


class LegacyNoise:
    """Adapts an object with ``gaussian(shape, std, step)`` and ``poisson_sample(n, q, step)``
    (one call per marginal; ``public/`` labels for public draws) to :class:`NoiseSource`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def public_normal(self, shape: tuple[int, ...], step: str) -> np.ndarray:
        return np.asarray(
            self.inner.gaussian(tuple(shape), 1.0, PUBLIC_PREFIX + step), dtype=np.float64
        )

    def release(
        self,
        queries: Sequence[np.ndarray],
        scales: Sequence[float],
        multiplier: float,
        steps: Sequence[str],
    ) -> list[np.ndarray]:
        _check(queries, scales, multiplier, steps)
        return [
            np.asarray(qy, dtype=np.float64) + self.inner.gaussian(np.shape(qy), multiplier * s, st)
            for qy, s, st in zip(queries, scales, steps, strict=True)
        ]

    def sampled_release(
        self,
        sizes: Sequence[int],
        q: float,
        compute: Compute,
        scales: Sequence[float],
        multiplier: float,
        steps: Sequence[str],
    ) -> list[np.ndarray]:
        masks = [
            np.asarray(self.inner.poisson_sample(int(n), q, f"{st}/sample"), dtype=bool)
            for n, st in zip(sizes, steps, strict=True)
        ]
        queries = _sampled_queries(sizes, q, compute, masks)
        return self.release(queries, scales, multiplier, [f"{st}/noise" for st in steps])


def as_noise_source(noise: Any) -> NoiseSource:
    """``noise`` itself if it has the current interface, else wrapped in :class:`LegacyNoise`."""
    if all(hasattr(noise, n) for n in ("public_normal", "release", "sampled_release")):
        return noise  # type: ignore[no-any-return]
    if all(hasattr(noise, n) for n in ("gaussian", "poisson_sample")):
        return LegacyNoise(noise)
    raise InvalidParameterError(
        "noise",
        f"{type(noise).__name__} is not a noise source",
        "pass RecordingNoise(seed) or LedgerNoise(ledger, rng)",
    )

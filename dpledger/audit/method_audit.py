"""Empirical audit of a whole installed method on neighbouring datasets built from its data.

For each audited relation (add/remove, replace-one):

1. the neighbours ``(D, D')`` are built from the data by the method's own rule
   (``MethodSpec.neighbours``), else with a canary record (:mod:`dpledger.audit.neighbours`);
2. the claim is the accountant's certified epsilon for the method's own declaration under that
   adjacency (:func:`~dpledger.audit.auditor.accountant_claim`);
3. the method is run ``runs`` times on each side, each run under
   :func:`~dpledger.runtime.runner.run_verified` with its own seed drawn from the audit's
   generator; every run's numeric outputs are flattened into one vector (in the order of the
   sorted output names; strings and other objects are left out);
4. the vectors are audited by :func:`~dpledger.audit.auditor.audit_mechanism`: a scalar
   output is thresholded directly; a vector is projected on a linear discriminant trained on
   separate runs. Of the ``runs`` per side, a fifth trains the discriminant (vectors only), a
   fifth (a quarter for scalars) chooses the event and the rest tests it.

Confidence ``1 - alpha`` holds jointly over every relation and delta audited (Bonferroni).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.audit.auditor import (
    NO_CLAIM,
    NO_VIOLATION,
    VIOLATION,
    AuditResult,
    Claim,
    accountant_claim,
    audit_mechanism,
)
from dpledger.audit.neighbours import NeighbourPair, build_neighbours
from dpledger.core.adjacency import RELATIONS, Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError, PluginError
from dpledger.core.events import Event
from dpledger.core.specs import MethodSpec
from dpledger.runtime import session
from dpledger.runtime.integrity import deferred_checks

FloatArray = NDArray[np.float64]
#: the fewest runs per side the split into train / search / test allows
MIN_RUNS = 50
CLAIM_SOURCE = "dpledger.accountant.select.account of the method's declaration"


@attrs.frozen
class RelationAudit:
    """The audit of one relation: the neighbours, the claim and the auditor's result."""

    relation: str
    neighbours: str
    result: AuditResult

    def to_dict(self) -> dict[str, Any]:
        out = self.result.to_dict()
        for row in out["audits"]:
            row["relation"] = self.relation
        return {"relation": self.relation, "neighbours": self.neighbours, **out}


@attrs.frozen
class MethodAuditResult:
    """Audits of one method over the relations it could be audited under."""

    method: str
    runs: int
    seed: int | None
    alpha: float
    relations: tuple[RelationAudit, ...]
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def verdict(self) -> str:
        verdicts = {r.result.verdict for r in self.relations}
        if VIOLATION in verdicts:
            return VIOLATION
        return NO_CLAIM if verdicts == {NO_CLAIM} else NO_VIOLATION

    @property
    def no_power(self) -> bool:
        """Some relation and delta had no power: its test event was hit on neither side
        (:attr:`~dpledger.audit.auditor.DeltaAudit.no_power`)."""
        return any(r.result.no_power for r in self.relations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "verdict": self.verdict,
            "no_power": self.no_power,
            "runs": self.runs,
            "seed": self.seed,
            "alpha": self.alpha,
            "confidence": 1.0 - self.alpha,
            "note": "an empirical lower bound can falsify a claim, never verify it",
            "relations": [r.to_dict() for r in self.relations],
            "skipped": [{"relation": r, "reason": why} for r, why in self.skipped],
        }


def check_runs(runs: Any) -> int:
    """``runs`` as an integer >= :data:`MIN_RUNS` (a bool or a float is refused)."""
    if isinstance(runs, bool) or not isinstance(runs, int | np.integer) or runs < MIN_RUNS:
        raise InvalidParameterError(
            "runs", f"must be an integer >= {MIN_RUNS}, got {runs!r}", "pass e.g. --runs 2000"
        )
    return int(runs)


def check_relations(relation: str | None, default: str) -> tuple[str, ...]:
    """``None`` means ``default``; ``"both"`` means every relation."""
    chosen = default if relation is None else relation
    if chosen == "both":
        return RELATIONS
    if chosen not in RELATIONS:
        raise InvalidParameterError(
            "relation", f"unknown relation {chosen!r}", "use add_remove, replace_one or both"
        )
    return (chosen,)


def table_summary(value: Mapping[str, Any]) -> FloatArray:
    """Fixed-size summary of user tables (``{'schema', 'users'}``): the numbers of users and
    rows, the mean of every numeric column and the count of every category."""
    schema, users = value["schema"], value["users"]
    rows = [r for u in users for r in u["rows"]]
    out = [float(len(users)), float(len(rows))]
    for j, col in enumerate(schema):
        if col.get("kind") == "numeric":
            out.append(float(np.mean([float(r[j]) for r in rows])) if rows else 0.0)
        elif col.get("kind") == "categorical":
            out += [float(sum(r[j] == c for r in rows)) for c in col.get("categories", ())]
    return np.asarray(out, dtype=np.float64)


def flatten_outputs(outputs: Mapping[str, Any]) -> FloatArray:
    """Every numeric output (sorted by name, mappings recursively) flattened into one float
    vector; an output with a ``to_json()`` form of user tables enters as its
    :func:`table_summary`; strings and other objects are left out."""
    parts = _numeric_parts(outputs)
    if not parts:
        raise InvalidParameterError(
            "outputs",
            "the method released no numeric output the audit could score",
            "audit a method with numeric outputs, or register a statistic for it",
        )
    vec = np.concatenate(parts)
    # an infinite output is still an output: keep it comparable (a NaN has no order)
    return np.nan_to_num(
        vec, nan=0.0, posinf=np.finfo(np.float64).max, neginf=-np.finfo(np.float64).max
    )


def _numeric_parts(outputs: Mapping[str, Any]) -> list[FloatArray]:
    parts: list[FloatArray] = []
    for name in sorted(outputs):
        value = outputs[name]
        if isinstance(value, str | bytes) or value is None:
            continue
        if isinstance(value, Mapping):
            parts += _numeric_parts({str(k): v for k, v in value.items()})
            continue
        to_json = getattr(value, "to_json", None)
        if callable(to_json):
            form = to_json()
            if isinstance(form, Mapping) and "schema" in form and "users" in form:
                parts.append(table_summary(form))
            continue
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            continue
        parts.append(arr.reshape(-1))
    return parts


def method_sampler(
    spec: MethodSpec,
    params: Any,
    adjacency: Adjacency,
    statistic: Callable[[Mapping[str, Any]], FloatArray] = flatten_outputs,
) -> Callable[[Any, int, np.random.Generator], FloatArray]:
    """``sample(data, n, rng)``: ``n`` verified runs, each seeded from ``rng``, as vectors."""
    width: list[int] = []
    declared: list[session.Declared] = []  # declared once, in the first batch

    def sample(data: Any, n: int, rng: np.random.Generator) -> FloatArray:
        rows = []
        with deferred_checks():  # one integrity check per batch: nothing leaves it unchecked
            if not declared:
                declared.append(session.declare(spec, params, adjacency, _as_declared))
            for _ in range(n):
                seed = int(rng.integers(0, 2**62))
                result = session.execute(declared[0], data, seed=seed)
                vec = statistic(result.outputs)
                if not width:
                    width.append(vec.size)
                if vec.size != width[0]:
                    raise PluginError(
                        f"method {spec.name!r}: its numeric outputs have {vec.size} values in "
                        f"one run and {width[0]} in another; the audit needs a fixed-size release"
                    )
                rows.append(vec)
        out = np.asarray(rows, dtype=np.float64).reshape(n, -1)
        return out[:, 0] if out.shape[1] == 1 else out

    return sample


def _as_declared(event: Event, adjacency: Adjacency) -> Event:
    """No lowering: the event as the method declared it."""
    return event


def claimed_event(
    spec: MethodSpec,
    params: Any,
    adjacency: Adjacency,
    lower: Callable[[Event, Adjacency], Event] | None = None,
) -> tuple[Event, Adjacency]:
    """The method's declaration for ``adjacency`` as the core event the accountant certifies,
    and the adjacency to account it under: stated per privacy unit by the run session, as
    ``dpledger run`` does (a row-level event on a user-level source is lifted)."""
    declared = session.declare(spec, params, adjacency, lower or _as_declared)
    return declared.per_unit, declared.unit_adjacency


def split_runs(runs: int, scalar: bool) -> tuple[int, int]:
    """``(n_search, n_test)`` per side; vectors also train on ``n_search`` further runs."""
    if scalar:
        n_search = runs // 4
        return n_search, runs - n_search
    n_search = runs // 5
    return n_search, runs - 2 * n_search


#: one relation to audit: its adjacency, the neighbours, the claim and where the claim is from
_Planned = tuple[Adjacency, NeighbourPair, Claim | None, str]


def _check_alpha_and_seed(alpha: Any, seed: Any) -> None:
    if not (isinstance(alpha, float | int) and not isinstance(alpha, bool) and 0 < alpha < 1):
        raise InvalidParameterError("alpha", f"must lie in (0, 1), got {alpha!r}", "pass 0.05")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise InvalidParameterError("seed", f"must be an integer >= 0, got {seed!r}", "pass 0")


def _planned(
    spec: MethodSpec,
    params: Any,
    data: Any,
    adj: Adjacency,
    lower: Callable[[Event, Adjacency], Event] | None,
    claimed_epsilon: Claim | None,
    deltas: Sequence[float],
) -> _Planned:
    """One relation's neighbours and claim (the given one, else the accountant's, which must
    be finite at some delta); a DPLedgerError says why the relation cannot be audited."""
    pair = build_neighbours(spec, params, data, adj)  # the spec's rule, else per record
    event, claim_adj = claimed_event(spec, params, adj, lower)
    claim: Claim | None = claimed_epsilon
    source = "given"
    if claim is None:
        claim = accountant_claim(event, claim_adj)
        source = CLAIM_SOURCE
        values = [claim(float(delta)) for delta in deltas]  # fail fast, before any run
        if not any(math.isfinite(v) for v in values):
            raise InvalidParameterError(
                "params",
                f"{spec.name} declares no privacy guarantee in this "
                "configuration (epsilon = inf), so there is no claim to audit",
                "audit a configuration with a certified, finite epsilon",
            )
    return adj, pair, claim, source


def _audit_relation(
    spec: MethodSpec,
    params: Any,
    planned: _Planned,
    runs: int,
    deltas: Sequence[float],
    a_eff: float,
    gen: np.random.Generator,
) -> RelationAudit:
    """The method's runs on one relation's neighbours, audited against its claim."""
    adj, pair, claim, source = planned
    sampler = method_sampler(spec, params, adj)
    probe = sampler(pair.d, 1, gen)
    n_search, n_test = split_runs(runs, probe.ndim == 1)
    result = audit_mechanism(
        sampler,
        pair.d,
        pair.d_prime,
        claimed_epsilon=claim,
        deltas=deltas,
        alpha=a_eff,
        n_search=n_search,
        n_test=n_test,
        rng=gen,
        description=f"{spec.name} under {adj.describe()}: {pair.description}",
        claim_source=source,
    )
    return RelationAudit(adj.relation, pair.description, result)


def audit_method(
    spec: MethodSpec,
    params: Any,
    data: Any,
    *,
    adjacency: Adjacency | None = None,
    relation: str | None = None,
    runs: int = 2000,
    deltas: Sequence[float] = (1e-3,),
    alpha: float = 0.05,
    seed: int | None = None,
    claimed_epsilon: Claim | None = None,
    lower: Callable[[Event, Adjacency], Event] | None = None,
) -> MethodAuditResult:
    """Audit ``spec`` run with ``params`` on neighbours of ``data``.

    ``adjacency`` is the configured one (its relation is the default of ``relation``, which
    may be ``"add_remove"``, ``"replace_one"`` or ``"both"``). ``lower`` maps plugin mechanism
    events onto core events (:meth:`PluginHost.lower`). A relation the method refuses to
    declare, or the audit cannot build neighbours for, is skipped with its reason when
    ``"both"`` was asked for, and is an error otherwise.
    """
    runs = check_runs(runs)
    adjacency = adjacency or Adjacency()
    relations = check_relations(relation, adjacency.relation)
    _check_alpha_and_seed(alpha, seed)
    plan: list[_Planned] = []
    skipped: list[tuple[str, str]] = []
    for rel in relations:
        adj = attrs.evolve(adjacency, relation=rel)
        try:
            plan.append(_planned(spec, params, data, adj, lower, claimed_epsilon, deltas))
        except DPLedgerError as exc:
            if len(relations) == 1:
                raise
            skipped.append((rel, str(exc)))
    if not plan:
        reasons = "; ".join(f"{r}: {why}" for r, why in skipped)
        raise InvalidParameterError(
            "relation",
            f"no relation could be audited ({reasons})",
            "fix the data or the configuration",
        )
    gen = np.random.default_rng(seed)
    a_eff = float(alpha) / len(plan)
    audits = []
    for planned in plan:
        audits.append(_audit_relation(spec, params, planned, runs, deltas, a_eff, gen))
    return MethodAuditResult(spec.name, runs, seed, float(alpha), tuple(audits), tuple(skipped))

"""Synthetic longitudinal tables from a hidden Markov model (paper C, Appendix C.3).

Each user has a latent state path ``S_1..S_T`` (start probabilities ``pi``, transition matrix
``A``) and emits per row ``N_f`` numeric values (independent Gaussians given the state, means and
standard deviations per state and column) and one categorical value (per-state probabilities).
The length ``T`` is drawn from a public length distribution. Column names follow the paper's
Table 7; a static ``subject_id`` column identifies the user.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables

NUMERIC_NAMES: tuple[str, ...] = ("Glomozole", "Crirodex", "Criphecor", "Zolsidex", "Zolphephine")
CATEGORICAL_NAME = "Zolronide"
CATEGORIES: tuple[str, ...] = ("Low", "Medium", "High", "Very High")
ID_NAME = "subject_id"
#: public bounds are the per-column hull of ``mean +- BOUND_SIGMAS * std`` over states
BOUND_SIGMAS = 4.0


def _int_arr(value: object) -> np.ndarray:
    return np.asarray(value, dtype=np.int64)


def _str_tuple(value: Any) -> tuple[str, ...]:
    return tuple(value)


def _arr(value: object) -> np.ndarray:
    return np.asarray(value, dtype=float)


def _simplex(field: str, p: np.ndarray, axis: int = -1) -> None:
    if not np.all(np.isfinite(p)) or np.any(p < 0) or not np.allclose(p.sum(axis=axis), 1.0):
        raise InvalidParameterError(
            field,
            "must hold non-negative probabilities summing to 1",
            "normalise the probabilities (rows of a matrix each sum to 1)",
        )


@attrs.frozen(eq=False)
class HMMParams:
    """Parameters of the generating HMM (``N_s`` states, ``N_f`` numeric columns, ``K`` levels).

    ``lengths`` lists the possible table lengths and ``length_probs`` their probabilities.
    """

    start: np.ndarray = attrs.field(converter=_arr)  # [N_s]
    transition: np.ndarray = attrs.field(converter=_arr)  # [N_s, N_s]
    means: np.ndarray = attrs.field(converter=_arr)  # [N_s, N_f]
    stds: np.ndarray = attrs.field(converter=_arr)  # [N_s, N_f]
    cat_probs: np.ndarray = attrs.field(converter=_arr)  # [N_s, K]
    lengths: np.ndarray = attrs.field(converter=_int_arr)
    length_probs: np.ndarray = attrs.field(converter=_arr)
    numeric_names: tuple[str, ...] = attrs.field(default=NUMERIC_NAMES, converter=_str_tuple)
    categories: tuple[str, ...] = attrs.field(default=CATEGORIES, converter=_str_tuple)

    def __attrs_post_init__(self) -> None:
        ns = self.start.shape[0] if self.start.ndim == 1 else -1
        if ns < 1:
            raise InvalidParameterError("start", "must be a 1-D vector", "pass [N_s] probabilities")
        _simplex("start", self.start)
        if self.transition.shape != (ns, ns):
            raise InvalidParameterError(
                "transition",
                f"shape {self.transition.shape} != ({ns}, {ns})",
                "pass an N_s x N_s row-stochastic matrix",
            )
        _simplex("transition", self.transition)
        nf = len(self.numeric_names)
        for name, m in (("means", self.means), ("stds", self.stds)):
            if m.shape != (ns, nf):
                raise InvalidParameterError(
                    name,
                    f"shape {m.shape} != ({ns}, {nf})",
                    "pass one value per state and numeric column",
                )
        if not np.all(np.isfinite(self.means)) or not np.all(self.stds > 0):
            raise InvalidParameterError(
                "means/stds", "means must be finite and stds > 0", "fix the emission parameters"
            )
        if self.cat_probs.shape != (ns, len(self.categories)):
            raise InvalidParameterError(
                "cat_probs",
                f"shape {self.cat_probs.shape} != ({ns}, {len(self.categories)})",
                "pass per-state probabilities over the categories",
            )
        _simplex("cat_probs", self.cat_probs)
        if (
            self.lengths.ndim != 1
            or self.lengths.shape != self.length_probs.shape
            or np.any(self.lengths < 1)
        ):
            raise InvalidParameterError(
                "lengths",
                "must be positive integers, one probability each",
                "pass lengths and length_probs of equal size",
            )
        _simplex("length_probs", self.length_probs)

    @property
    def n_states(self) -> int:
        return int(self.start.shape[0])

    def bounds(self) -> list[tuple[float, float]]:
        """Public per-column bounds from the parameters (not from data), rounded outward."""
        lo = (self.means - BOUND_SIGMAS * self.stds).min(axis=0)
        hi = (self.means + BOUND_SIGMAS * self.stds).max(axis=0)
        return [(math.floor(a), math.ceil(b)) for a, b in zip(lo, hi, strict=True)]

    def schema(self) -> TableSchema:
        """The table schema: ``subject_id`` (static), numeric columns, the categorical column."""
        cols = [Column(ID_NAME, "static")]
        cols += [
            Column(n, "numeric", lower=lo, upper=hi)
            for n, (lo, hi) in zip(self.numeric_names, self.bounds(), strict=True)
        ]
        cols.append(Column(CATEGORICAL_NAME, "categorical", categories=self.categories))
        return TableSchema(tuple(cols))


def default_hmm_params() -> HMMParams:
    """A 4-state sticky HMM with well-separated emissions and lengths uniform on 6..20."""
    transition = np.array(
        [
            [0.80, 0.10, 0.05, 0.05],
            [0.05, 0.80, 0.10, 0.05],
            [0.05, 0.05, 0.80, 0.10],
            [0.10, 0.05, 0.05, 0.80],
        ]
    )
    means = np.array(
        [
            [-1.0, -2.0, -3.0, 0.5, 4.0],
            [2.5, -1.5, 3.5, 3.0, 4.0],
            [0.5, -3.0, 2.5, 3.5, 8.0],
            [1.0, 0.0, 0.5, 2.0, 1.5],
        ]
    )
    stds = np.array(
        [
            [0.6, 0.5, 0.8, 0.5, 1.0],
            [0.8, 0.6, 0.5, 0.6, 1.0],
            [0.5, 0.8, 0.6, 0.5, 1.5],
            [0.7, 0.7, 0.7, 0.8, 0.8],
        ]
    )
    cat_probs = np.array(
        [
            [0.70, 0.20, 0.05, 0.05],
            [0.05, 0.15, 0.20, 0.60],
            [0.05, 0.10, 0.70, 0.15],
            [0.10, 0.70, 0.10, 0.10],
        ]
    )
    lengths = np.arange(6, 21)
    return HMMParams(
        start=[0.4, 0.3, 0.2, 0.1],
        transition=transition,
        means=means,
        stds=stds,
        cat_probs=cat_probs,
        lengths=lengths,
        length_probs=np.full(lengths.size, 1.0 / lengths.size),
    )


@attrs.frozen(eq=False)
class HMMSample:
    """Tables plus the latent state path of every user (for checks against the parameters)."""

    tables: UserTables
    states: tuple[np.ndarray, ...]


def hmm_sample(n_users: int, seed: int, params: HMMParams | None = None) -> HMMSample:
    """Draw ``n_users`` tables and their latent paths from the HMM."""
    if isinstance(n_users, bool) or not isinstance(n_users, int) or n_users < 1:
        raise InvalidParameterError(
            "n_users", f"must be an integer >= 1, got {n_users!r}", "pass a positive integer"
        )
    p = default_hmm_params() if params is None else params
    rng = np.random.default_rng(seed)
    schema = p.schema()
    ns = p.n_states
    cum_a = np.cumsum(p.transition, axis=1)
    users: list[UserTable] = []
    paths: list[np.ndarray] = []
    for i in range(n_users):
        t_len = int(rng.choice(p.lengths, p=p.length_probs))
        s = np.empty(t_len, dtype=np.int64)
        s[0] = rng.choice(ns, p=p.start)
        u = rng.random(t_len)
        for t in range(1, t_len):
            s[t] = min(int(np.searchsorted(cum_a[s[t - 1]], u[t], side="right")), ns - 1)
        x = p.means[s] + p.stds[s] * rng.standard_normal((t_len, p.means.shape[1]))
        cum_c = np.cumsum(p.cat_probs[s], axis=1)
        k = np.minimum((rng.random((t_len, 1)) > cum_c).sum(axis=1), len(p.categories) - 1)
        uid = str(i)
        rows = tuple(
            (uid, *(float(v) for v in x[t]), p.categories[int(k[t])]) for t in range(t_len)
        )
        users.append(UserTable(uid, rows))
        paths.append(s)
    return HMMSample(UserTables(schema, tuple(users)), tuple(paths))


def hmm_dataset(
    n_users: int, seed: int, params: HMMParams | None = None
) -> tuple[UserTables, HMMParams]:
    """Draw ``n_users`` user tables from the HMM (default: :func:`default_hmm_params`)."""
    p = default_hmm_params() if params is None else params
    return hmm_sample(n_users, seed, p).tables, p

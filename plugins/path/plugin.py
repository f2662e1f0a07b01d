"""The PATH method (paper C): DP fine-tuned table language model + private selection.

Pipeline: DP-SGD at user level (:mod:`~dpledger.plugins.path.train`), row-by-row generation of
``ceil(overgeneration * n_synthetic)`` candidate tables (post-processing), then private selection
of ``n_synthetic`` of them by noisy nearest-neighbour votes of the real tables
(:mod:`~dpledger.plugins.path.select`). Declared event::

    Composed([SelfComposed(PoissonSampled(q, Gaussian(σ)), steps), Gaussian(σ_sel)])

with noise multipliers relative to the per-user contribution (clip norm ``C``; ``sqrt(k)``
votes). ``σ`` is given or calibrated so that the accountant's bound on the *composed* event meets
``target_epsilon`` at ``delta``; ``σ_sel`` is given or calibrated so that the accountant
certifies ``(selection_epsilon, delta)`` for the selection alone. A calibrated noise multiplier
is the least with three significant digits that is certified (at most 1 % more noise; a run
stays the same when the accountant's bounds move slightly). The privacy unit is the
user's whole table: user-level adjacency is required.

No published value is derived from the private data: ``delta`` (default ``1/n²``), the number
of released tables ``n_synthetic`` (default ``n``) and DP-SGD's ``expected_batch_size``
(default ``q·n``) default to the *stated* public number of users ``public_n_users``; without it
all three must be given (the number of tables in the data is never used for them).

This module imports neither torch nor transformers at import time (``declare`` is cheap).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import numpy as np

from dpledger.plugin import (
    Adjacency,
    ComposedEvent,
    Declaration,
    Event,
    GaussianEvent,
    InvalidParameterError,
    Ledger,
    MethodSpec,
    PoissonSampledEvent,
    ProofRef,
    SelfComposedEvent,
    account,
    calibrate_noise_multiplier,
    calibrate_on_grid,
    hookimpl,
    one_of,
    positive_finite,
    positive_int,
    probability,
    user_tables,
)
from dpledger.plugins.path.schema import TableSchema, UserTable, UserTables

EMBEDDERS: tuple[str, ...] = ("minilm", "summary")
#: accountants used here (the PRV backend is skipped for speed; the host may run all of them)
BACKENDS: tuple[str, ...] = ("pld", "rdp")


def _optional(check: Any) -> Any:
    def run(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            check(instance, attribute, value)

    return run


def _nonnegative_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidParameterError(
            attribute.name,
            f"must be an integer >= 0, got {value!r}",
            "pass e.g. 8 (0 trains every weight)",
        )


def _fraction(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidParameterError(
            attribute.name, f"must lie in [0, 1], got {value!r}", "pass e.g. 0.1"
        )


def _delta(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise InvalidParameterError(
            "delta",
            f"must lie in (0, 1), got {value!r}",
            "pass e.g. 1e-6, or leave it unset for 1/n^2",
        )


def _pmf(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(v) for v in value)


def _precision(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 17
    ):
        raise InvalidParameterError(
            "precision", f"must be None or in [0, 17], got {value!r}", "pass e.g. 2 decimals"
        )


@attrs.frozen
class PathParams:
    """Parameters of PATH (all public). Give ``noise_multiplier`` or ``target_epsilon``."""

    # privacy of training
    noise_multiplier: float | None = attrs.field(default=None, validator=_optional(positive_finite))
    target_epsilon: float | None = attrs.field(default=None, validator=_optional(positive_finite))
    delta: float | None = attrs.field(default=None, validator=_delta)
    public_n_users: int | None = attrs.field(default=None, validator=_optional(positive_int))
    clip_norm: float = attrs.field(default=1.0, validator=positive_finite)
    sampling_probability: float = attrs.field(default=0.1, validator=probability)
    steps: int = attrs.field(default=100, validator=positive_int)
    expected_batch_size: float | None = attrs.field(
        default=None, validator=_optional(positive_finite)
    )
    # privacy of selection
    selection_epsilon: float | None = attrs.field(default=1.0, validator=_optional(positive_finite))
    selection_noise_multiplier: float | None = attrs.field(
        default=None, validator=_optional(positive_finite)
    )
    k: int = attrs.field(default=10, validator=positive_int)
    overgeneration: float = attrs.field(default=3.0, validator=positive_finite)
    n_synthetic: int | None = attrs.field(default=None, validator=_optional(positive_int))
    embedder: str = attrs.field(default="minilm", validator=one_of(*EMBEDDERS))
    # model and optimisation
    model_dir: str | None = None
    lora_rank: int = attrs.field(default=8, validator=_nonnegative_int)
    lora_alpha: float | None = attrs.field(default=None, validator=_optional(positive_finite))
    n_layer: int = attrs.field(default=2, validator=positive_int)
    n_head: int = attrs.field(default=2, validator=positive_int)
    n_embd: int = attrs.field(default=64, validator=positive_int)
    max_tokens: int = attrs.field(default=1024, validator=positive_int)
    learning_rate: float = attrs.field(default=5e-4, validator=positive_finite)
    schedule: str = attrs.field(default="cosine", validator=one_of("cosine", "constant"))
    optimizer: str = attrs.field(default="adam", validator=one_of("adam", "sgd"))
    physical_batch: int = attrs.field(default=16, validator=positive_int)
    # data layout
    precision: int | None = attrs.field(default=2, validator=_precision)
    p_start: float = attrs.field(default=0.1, validator=_fraction)
    length_pmf: tuple[float, ...] | None = attrs.field(default=None, converter=_pmf)
    max_rows: int = attrs.field(default=32, validator=positive_int)
    # generation and runtime
    temperature: float = attrs.field(default=1.0, validator=positive_finite)
    guided: bool | None = None
    generation_batch: int = attrs.field(default=64, validator=positive_int)
    max_row_tokens: int = attrs.field(default=256, validator=positive_int)
    torch_threads: int = attrs.field(default=1, validator=positive_int)
    clip_to_bounds: bool = True
    progress: bool = False

    def __attrs_post_init__(self) -> None:
        if (self.noise_multiplier is None) == (self.target_epsilon is None):
            raise InvalidParameterError(
                "noise_multiplier",
                "give exactly one of noise_multiplier or target_epsilon",
                "set noise_multiplier (σ of DP-SGD) or target_epsilon (total ε)",
            )
        if self.selection_noise_multiplier is None and self.selection_epsilon is None:
            raise InvalidParameterError(
                "selection_epsilon",
                "the private selection needs a budget",
                "set selection_epsilon (e.g. 1.0) or selection_noise_multiplier",
            )
        if self.guided is not None and not isinstance(self.guided, bool):
            raise InvalidParameterError(
                "guided",
                f"must be true, false or unset, got {self.guided!r}",
                "leave it unset (auto)",
            )
        if self.length_pmf is not None:
            pmf = np.asarray(self.length_pmf)
            if (
                pmf.size == 0
                or np.any(~np.isfinite(pmf))
                or np.any(pmf < 0)
                or not math.isclose(float(pmf.sum()), 1.0, rel_tol=1e-6)
            ):
                raise InvalidParameterError(
                    "length_pmf",
                    "must hold non-negative probabilities of lengths 1, 2, ... summing to 1",
                    "pass the public length distribution, e.g. [0.5, 0.5]",
                )
        if self.public_n_users is None:
            for name in ("delta", "n_synthetic", "expected_batch_size"):
                if getattr(self, name) is None:
                    raise InvalidParameterError(
                        name,
                        "has no public default: it would be derived from the private "
                        "number of users",
                        "set public_n_users (a public count, not read from the data), or set "
                        "delta, n_synthetic and expected_batch_size",
                    )
        if self.sampling_probability == 0:
            raise InvalidParameterError(
                "sampling_probability", "is 0, so nothing is trained", "use a rate in (0, 1]"
            )


def _train_event(params: PathParams, sigma: float) -> Event:
    step = PoissonSampledEvent(params.sampling_probability, GaussianEvent(sigma))
    return SelfComposedEvent(step, params.steps)


def declared_delta(params: PathParams) -> float | None:
    """``delta`` if given, else ``1/n²`` for the public ``n``; None when neither is known."""
    if params.delta is not None:
        return float(params.delta)
    if params.public_n_users is not None:
        return 1.0 / float(params.public_n_users) ** 2
    return None


def _need_delta(params: PathParams, why: str) -> float:
    delta = declared_delta(params)
    if delta is None:
        raise InvalidParameterError(
            "delta",
            f"is needed before the run to {why}",
            "set delta, or public_n_users (delta = 1/n^2), or give noise multipliers instead",
        )
    return delta


@functools.lru_cache(maxsize=64)
def noise_multipliers(params: PathParams, adjacency: Adjacency) -> tuple[float, float]:
    """(σ of training, σ of selection), calibrated by the accountant when targets are given."""
    if params.selection_noise_multiplier is not None:
        sigma_sel = float(params.selection_noise_multiplier)
    else:
        assert params.selection_epsilon is not None
        delta = _need_delta(params, "calibrate the selection noise to selection_epsilon")
        sigma_sel = calibrate_on_grid(
            GaussianEvent,
            adjacency,
            float(params.selection_epsilon),
            delta,
            bracket=(5e-2, 1e4),
            backends=("closed_form",),
        ).noise_multiplier
    if params.noise_multiplier is not None:
        return float(params.noise_multiplier), sigma_sel
    assert params.target_epsilon is not None
    target = float(params.target_epsilon)
    delta = _need_delta(params, "calibrate the training noise to target_epsilon")
    selection = GaussianEvent(sigma_sel)
    alone = account(
        selection, adjacency, delta=delta, backends=("closed_form", *BACKENDS)
    ).bound.epsilon
    if not alone < target:
        raise InvalidParameterError(
            "target_epsilon",
            f"{target!r} leaves nothing for training: the selection alone "
            f"costs ε = {alone:.4g} at δ = {delta:.3g}",
            "raise target_epsilon or lower selection_epsilon",
        )

    def make(s: float) -> Event:
        return ComposedEvent([_train_event(params, s), selection])

    try:
        # RDP is fast and never below PLD: its answer brackets the tight PLD calibration
        upper = calibrate_noise_multiplier(
            make, adjacency, target, delta, bracket=(0.05, 1e3), rtol=1e-2, backends=("rdp",)
        ).noise_multiplier
        bracket = (upper / 2.0, upper)
    except InvalidParameterError:
        bracket = (0.05, 1e3)
    try:
        result = calibrate_on_grid(
            make, adjacency, target, delta, bracket=bracket, backends=("pld",)
        )
    except InvalidParameterError as exc:
        if exc.field != "bracket":
            raise
        raise InvalidParameterError(
            "target_epsilon",
            f"{target!r} is too small to train: even noise multiplier "
            f"{bracket[1]:.4g} exceeds it with {params.steps} steps at q = "
            f"{params.sampling_probability:g}",
            "raise target_epsilon, or lower steps, sampling_probability or selection_epsilon",
        ) from None
    return result.noise_multiplier, sigma_sel


def _check_adjacency(adjacency: Adjacency) -> None:
    if not isinstance(adjacency, Adjacency) or adjacency.unit != "user":
        raise InvalidParameterError(
            "adjacency",
            "PATH protects each user's whole table, but row-level adjacency was "
            "given (one row per privacy unit)",
            "use user-level adjacency, e.g. Adjacency(unit='user', unit_key='user_id') "
            "([adjacency] unit = 'user', unit_key = 'user_id' in a config file)",
        )


def declare(params: PathParams, adjacency: Adjacency) -> Declaration:
    """Per user: Poisson sampling of users, per-user clipping, and private selection; the run
    keeps one table per user id (``ledger.bound_units``)."""
    _check_adjacency(adjacency)
    sigma, sigma_sel = noise_multipliers(params, adjacency)
    return Declaration(
        ComposedEvent([_train_event(params, sigma), GaussianEvent(sigma_sel)]), "user"
    )


def one_table_per_user(tables: UserTables, ledger: Ledger) -> UserTables:
    """The first table of every user id, enforced by the ledger (the privacy unit) by the user
    ids it read from the data."""
    if ledger.units is None or ledger.units.rows_in() != len(tables.users):
        raise InvalidParameterError(
            "data.users",
            "the ledger holds no user id per table of the data",
            "run through run_verified (or dpledger run) on the user tables themselves",
        )
    keep = ledger.bound_units(1, step="path.users")
    if len(keep) == len(tables.users):
        return tables
    return UserTables(tables.schema, tuple(tables.users[int(i)] for i in keep))


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def user_tables_from(data: Any) -> UserTables:
    """``data`` as :class:`UserTables`: the tables themselves, or their JSON form (a mapping with
    ``schema`` and ``users``, as ``dpledger run`` reads it from a data file)."""
    if isinstance(data, Mapping) and "schema" in data and "users" in data:
        from dpledger.plugins.path.ddp import tables_from_json

        return tables_from_json({"schema": list(data["schema"]), "users": list(data["users"])})
    if not isinstance(data, UserTables):
        raise InvalidParameterError(
            "data",
            f"expected UserTables, got {type(data).__name__}",
            "pass UserTables(schema, users), or a mapping with 'schema' and 'users' "
            "(the JSON form of dpledger.plugins.path.ddp.tables_to_json)",
        )
    return data


def length_pmf(params: PathParams) -> np.ndarray:
    """The public length distribution used for split points (uniform on 1..max_rows if unset)."""
    if params.length_pmf is not None:
        return np.asarray(params.length_pmf)
    return np.full(params.max_rows, 1.0 / params.max_rows)


def clip_to_bounds(schema: TableSchema, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Numeric values clipped to the columns' public bounds (post-processing)."""
    lo = [c.lower if c.is_numeric else None for c in schema.columns]
    hi = [c.upper if c.is_numeric else None for c in schema.columns]
    out = []
    for row in rows:
        vals = list(row)
        for j, v in enumerate(vals):
            if lo[j] is not None and v < lo[j]:
                vals[j] = lo[j]
            if hi[j] is not None and v > hi[j]:
                vals[j] = hi[j]
        out.append(tuple(vals))
    return out


def _public(value: int | None, params: PathParams) -> int:
    """``value``, else ``public_n_users`` (never the number of tables in the data)."""
    if value is not None:
        return int(value)
    if params.public_n_users is None:
        raise InvalidParameterError(
            "public_n_users",
            "is needed for a data-independent default",
            "set public_n_users, or n_synthetic and expected_batch_size",
        )
    return int(params.public_n_users)


def _train_config(params: PathParams, sigma: float) -> Any:
    """The DP fine-tuning configuration (public values only)."""
    from dpledger.plugins.path import train

    return train.TrainConfig(
        steps=params.steps,
        sampling_probability=params.sampling_probability,
        noise_multiplier=sigma,
        clip_norm=params.clip_norm,
        expected_batch_size=(
            params.expected_batch_size
            if params.expected_batch_size is not None
            else params.sampling_probability * _public(None, params)
        ),
        learning_rate=params.learning_rate,
        schedule=params.schedule,
        optimizer=params.optimizer,
        max_tokens=params.max_tokens,
        physical_batch=params.physical_batch,
        precision=params.precision,
        progress=params.progress,
    )


def _generation_config(params: PathParams, n_candidates: int, codec: Any) -> Any:
    """How the candidates are generated (guided decoding by default for byte-level codecs)."""
    from dpledger.plugins.path import generate

    return generate.GenerationConfig(
        n_tables=n_candidates,
        max_rows=params.max_rows,
        max_tokens=params.max_tokens,
        max_row_tokens=params.max_row_tokens,
        temperature=params.temperature,
        batch_size=params.generation_batch,
        progress=params.progress,
        max_decimals=params.precision,
        guided=codec.byte_level if params.guided is None else params.guided,
    )


def _selected(
    params: PathParams,
    tables: UserTables,
    candidates: list[Any],
    n_syn: int,
    sigma_sel: float,
    ledger: Ledger,
) -> list[int]:
    """The indices of the candidates chosen by the private selection: real and candidate
    tables embedded alike, the selection's noise drawn through the ledger."""
    from dpledger.plugins.path import select

    text_embed = select.MiniLMEmbedder() if params.embedder == "minilm" else None
    real = select.embed_tables(
        tables.schema,
        [u.rows for u in tables.users],
        params.embedder,
        max_rows=params.max_rows,
        text_embed=text_embed,
        precision=params.precision,
    )
    cand = select.embed_tables(
        tables.schema,
        candidates,
        params.embedder,
        max_rows=params.max_rows,
        text_embed=text_embed,
        precision=params.precision,
    )
    chosen: list[int] = select.private_select(
        real,
        cand,
        k=params.k,
        top_n=n_syn,
        noise_multiplier=sigma_sel,
        ledger=ledger,
    ).tolist()
    return chosen


def run(params: PathParams, data: Any, ledger: Ledger, rng: np.random.Generator) -> dict[str, Any]:
    _check_adjacency(ledger.adjacency)
    tables = one_table_per_user(user_tables_from(data), ledger)
    from dpledger.plugins.path import generate, model, train, windowing

    # public values only (PathParams refuses a configuration that would read them off the data)
    delta = _need_delta(params, "report the total epsilon")
    sigma, sigma_sel = noise_multipliers(params, ledger.adjacency)
    n_syn = _public(params.n_synthetic, params)
    n_candidates = math.ceil(params.overgeneration * n_syn)
    config = _train_config(params, sigma)
    sampler = windowing.SplitSampler(length_pmf(params), params.p_start)
    with _torch_threads(params.torch_threads):
        lm, codec = model.load(
            params.model_dir,
            seed=int(rng.integers(0, 2**31 - 1)),
            default_kwargs={
                "n_layer": params.n_layer,
                "n_head": params.n_head,
                "n_embd": params.n_embd,
                "n_positions": params.max_tokens,
            },
        )
        gen = _generation_config(params, n_candidates, codec)
        lm = model.with_lora(
            lm, params.lora_rank, params.lora_alpha, seed=int(rng.integers(0, 2**31 - 1))
        )
        train.train(lm, codec, tables, config, ledger, rng, sampler)
        generated = generate.generate_tables(lm, codec, tables.schema, gen, rng)
        candidates = [t for t in generated if t]
        if params.clip_to_bounds:
            candidates = [clip_to_bounds(tables.schema, t) for t in candidates]
        selected: list[int] = []
        if candidates:
            selected = _selected(params, tables, candidates, n_syn, sigma_sel, ledger)
    synthetic = None
    if selected:
        users = tuple(
            UserTable(f"synthetic-{j}", tuple(candidates[i])) for j, i in enumerate(selected)
        )
        synthetic = UserTables(tables.schema, users)
    declared = ComposedEvent([_train_event(params, sigma), GaussianEvent(sigma_sel)])
    bound = account(declared, ledger.adjacency, delta=delta, backends=BACKENDS).bound
    info = {
        "epsilon_total": float(bound.epsilon),
        "delta": float(delta),
        "accountant": bound.method,
        "noise_multiplier": float(sigma),
        "selection_noise_multiplier": float(sigma_sel),
        "steps": params.steps,
        "sampling_probability": params.sampling_probability,
        "n_candidates": n_candidates,
        "n_valid_candidates": len(candidates),
        "n_selected": len(selected),
    }
    return {"synthetic": synthetic, "info": info}


SPEC = MethodSpec(
    name="path",
    params=PathParams,
    declare=declare,
    run=run,
    description="PATH: user-level DP fine-tuning of a table language model (Poisson-sampled "
    "DP-SGD with per-user clipping), row-by-row generation, and private selection "
    "by Gaussian-noised nearest-neighbour votes",
    proof=ProofRef(
        "Abadi et al. 2016, Algorithm 1 with one example per user per step (per-user clip C, "
        "add/remove sensitivity C; Poisson subsampling, Zhu & Wang 2019); Gaussian mechanism "
        "on a k-NN vote histogram of L2 sensitivity sqrt(k) (Balle & Wang 2018, Theorem 8); "
        "generation and top-N are post-processing; composition by the accountant",
        "docs/methods/path.md",
    ),
    neighbours=user_tables,
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)

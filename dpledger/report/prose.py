"""The report's prose: the formal statement, the unit of privacy, assumptions and warnings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpledger.accountant.graph_account import GraphAccount
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    Event,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    TabulatedProfileEvent,
)
from dpledger.report.model import (
    NO_GUARANTEE,
    Bracket,
    ReleaseRow,
    no_guarantee,
)
from dpledger.report.numbers import fmt_down, fmt_exact, fmt_up

#: default delta of a pipeline that states neither delta nor epsilon (as ``dpledger account``)

SETTING = (
    "Central model: a trusted curator holds the raw data of the sources below, runs the listed "
    "releases and publishes only their outputs (and post-processing of them). The guarantee "
    "covers everything published; it does not cover the curator itself, side channels or timing."
)
IDEALIZED_NUMERICS = (
    "idealized numerics: noise is drawn in floating point from a numpy generator; the guarantee "
    "is that of the ideal real-valued mechanisms (floating-point samplers can be porous, and no "
    "timing hardening is claimed)"
)
#: lift rules that change nothing (no warning)
_PLAIN_RULES = frozenset({"unchanged_k1", "declared_user_level", "compose_distributes"})
_GROUP_RULES = frozenset({"pure_group_privacy", "approx_group_privacy"})
#: a bracket wider than this ratio (upper / lower) gets a note
WIDE_BRACKET = 1.25


def statement(bound: Mapping[str, Any], adjacency: str, eps_query: bool) -> str:
    method = bound["method"]
    if no_guarantee(bound, eps_query):
        at = (
            f"no finite ε at δ = {fmt_exact(bound['delta'])}"
            if eps_query
            else f"δ = 1 at ε = {fmt_exact(bound['epsilon'])}"
        )
        return (
            f"The release carries {NO_GUARANTEE} with respect to {adjacency}: it contains a "
            f"non-private step, or its guarantee is vacuous ({at}; method {method})."
        )
    if not eps_query:
        return (
            f"The release is (ε, δ)-differentially private with respect to {adjacency}, with "
            f"δ = {fmt_up(bound['delta'])} (certified upper bound, method {method}) at "
            f"ε = {fmt_exact(bound['epsilon'])}."
        )
    return (
        f"The release is (ε, δ)-differentially private with respect to {adjacency}, with "
        f"ε = {fmt_up(float(bound['epsilon']))} (certified upper bound, method {method}) at "
        f"δ = {fmt_exact(bound['delta'])}."
    )


def unit_of_privacy(adjacencies: Sequence[tuple[str, Adjacency]]) -> str:
    parts = []
    for source, adj in adjacencies:
        if adj.unit == "row":
            parts.append(f"one row (record) of source {source!r}")
        else:
            what = adj.contribution.replace("_", " ")
            parts.append(
                f"one user of source {source!r} (identified by {adj.unit_key!r}, contributing "
                f"at most {adj.max_contributions} {what})"
            )
    return "; ".join(parts)


def relation_text(adj: Adjacency) -> str:
    if adj.relation == "add_remove":
        return (
            "add/remove: neighbouring datasets differ by the presence or absence of one unit's data"
        )
    return (
        "replace-one: neighbouring datasets differ by the substitution of one unit's data (the "
        "accountant doubles each per-unit add/remove contribution bound)"
    )


def sampling(event: Event) -> list[str]:
    out = []
    for e in event.walk():
        if isinstance(e, PoissonSampledEvent):
            out.append(
                f"Poisson subsampling at rate {fmt_exact(e.sampling_probability)}: every record "
                "is included in each step independently with that probability (shuffled or "
                "fixed-size batches are not covered by this analysis)"
            )
        elif isinstance(e, SampledWithoutReplacementEvent):
            out.append(
                f"sampling without replacement: a uniformly random subset of exactly "
                f"{e.sample_size} of the {e.source_size} records per step (the source size is "
                "public)"
            )
    return list(dict.fromkeys(out))


def claimed_tight(event: Event) -> list[str]:
    """What a certified lower bound rests on beyond the proofs: each claim that a plugin
    mechanism's dominating pair is its exact pair (``MechanismSpec.pair_is_tight``)."""
    claims = [
        e.tight_claim
        for e in event.walk()
        if isinstance(e, TabulatedProfileEvent) and e.tight_losses is not None
    ]
    return [
        f"the certified lower bound rests on a claim, not on a proof record: {c}"
        for c in dict.fromkeys(claims)
    ]


def assumptions(account: GraphAccount) -> tuple[str, ...]:
    out: list[str] = []
    for s in account.sources:
        red = s.reduction
        out.append(f"source {red.source!r}, neighbouring relation {relation_text(red.adjacency)}")
        if red.adjacency.unit == "user":
            out.append(
                f"source {red.source!r}: each user contributes at most "
                f"{red.adjacency.max_contributions} {red.adjacency.contribution.replace('_', ' ')}"
                " (the pipeline must enforce this bound; the guarantee fails otherwise)"
            )
        out.append(
            f"source {red.source!r}: its releases compose sequentially and adaptively "
            "(each may depend on earlier outputs)"
        )
        out.extend(f"source {red.source!r}: {n}" for n in red.notes)
        if len(red.alternatives) > 1:
            out.append(
                f"source {red.source!r}: parallel composition, the bound is the worst of "
                f"{len(red.alternatives)} cell combinations"
            )
    for r in account.releases:
        out.extend(f"release {r.release_id!r}: {t}" for t in sampling(r.lifted))
        out.extend(f"release {r.release_id!r}: {t}" for t in claimed_tight(r.lifted))
    out.append(
        "noise is stated relative to each query's per-record (per-unit) contribution bound; "
        "clipping or bounded domains must enforce it"
    )
    if len(account.sources) > 1:
        out.append(f"sources: {account.combined}")
    return tuple(out)


def unverified_warning(node: str, method: str) -> str:
    """The warning on a release whose method has no proof record (tier unverified)."""
    return (
        f"release {node!r}: method {method!r} is not a registered builtin method with a proof "
        "record (tier unverified, honest-but-curious: the bound holds only if the method really "
        "executes its declared event)"
    )


def warnings(
    rows: Sequence[ReleaseRow],
    account: GraphAccount,
    brackets: Sequence[Bracket],
    eps_query: bool,
) -> list[str]:
    out = [IDEALIZED_NUMERICS]
    bound = account.bound.to_dict()
    upper = float(bound["epsilon" if eps_query else "delta"])
    lower = float(bound["epsilon_lower" if eps_query else "delta_lower"])
    if upper == float("inf"):
        out.append("the bound is infinite: a release is non-private or its guarantee is vacuous")
    elif lower > 0 and upper > WIDE_BRACKET * lower:
        out.append(
            f"the certified bracket is wide (lower {fmt_down(lower)}, upper {fmt_up(upper)}): the "
            "true privacy loss may be well below the reported upper bound, never above it"
        )
    if bound["method"] == "prv":
        out.append(
            "approximation tier: the bound is prv-accountant's error-bounded numerical upper "
            "bound (a cross-check backend whose error analysis is the library's)"
        )
    for row in rows:
        if row.method is None:
            out.append(
                f"release {row.node!r} names no method: its declared event is taken as given "
                "(honest-but-curious)"
            )
        elif row.tier == "unverified":
            out.append(unverified_warning(row.node, row.method))
        elif row.tier == "contrib":
            out.append(
                f"release {row.node!r}: method {row.method!r} has trust tier contrib (its proof "
                "ships with dpledger; it does not meet the rule of the verified tier, "
                "docs/verification.md)"
            )
        for rule in row.lift_rules:
            if rule == "approx_group_privacy_vacuous":
                out.append(
                    f"release {row.node!r}: group privacy over the user's rows is vacuous "
                    "(δ ≥ 1), so the release counts as non-private"
                )
            elif rule in _GROUP_RULES:
                out.append(
                    f"release {row.node!r} is lifted to users by {rule} (valid but usually "
                    "loose; declaring it at user level can be tighter)"
                )
    for b in brackets:
        if b.bound is None and b.reason and b.reason.startswith("not installed"):
            out.append(f"cross-check backend {b.backend!r} is {b.reason}")
    return out


# -- observed runs: trained by another framework, read (not run) by dpledger -----------------
def observed_numerics(framework: str) -> str:
    """:data:`IDEALIZED_NUMERICS` of a run whose noise another framework drew."""
    return (
        f"idealized numerics: the noise was drawn in floating point by {framework}, not by "
        "dpledger; the guarantee is that of the ideal real-valued mechanisms (floating-point "
        "samplers can be porous, and no timing hardening is claimed)"
    )


def observed_release_warning(node: str, framework: str) -> str:
    """The warning on the release of an observed run (tier unverified: no ledger ran it)."""
    return (
        f"release {node!r} was observed, not run under the dpledger ledger (tier unverified): "
        f"its event is read from {framework}'s optimizer and data loader (public parameters and "
        f"step counts), and the bound holds only if {framework} executed those steps as "
        "configured"
    )


def observed_warnings(
    warnings: Sequence[str], node: str, method: str, framework: str
) -> tuple[str, ...]:
    """``warnings`` of a report of an observed run: no claim about dpledger's own noise
    generator or declaration, since neither took part."""
    swap = {
        IDEALIZED_NUMERICS: observed_numerics(framework),
        unverified_warning(node, method): observed_release_warning(node, framework),
    }
    return tuple(dict.fromkeys(swap.get(w, w) for w in warnings))


#: accountants of a framework that a report names when the record lacks their figure
FRAMEWORK_ACCOUNTANTS: dict[str, tuple[str, ...]] = {"Opacus": ("prv", "rdp")}


def framework_accountants(framework: str, accountant: str) -> str:
    """Which of the framework's accountants the record holds a figure of, and which not."""
    missing = [a for a in FRAMEWORK_ACCOUNTANTS.get(framework, ()) if a != accountant]
    text = f"the record holds {framework}'s {accountant} figure only"
    if not missing:
        return text
    figures = "figure was" if len(missing) == 1 else "figures were"
    return (
        f"{text}; {framework}'s {' and '.join(missing)} {figures} not computed for this run "
        f"({framework} accounts with the one accountant its engine was made with)"
    )


def _epsilon_is(epsilon: float) -> str:
    """'ε = x', or 'ε ≈ x' (six significant digits) when x is longer."""
    short = f"{epsilon:.6g}"
    return f"ε = {short}" if float(short) == epsilon else f"ε ≈ {short}"


def framework_accountants_held(
    framework: str, accountant: str, figures: Sequence[Mapping[str, Any]], difference: str
) -> str:
    """The record holds a figure of each of the framework's accountants: which, from what, and
    why they differ (``difference``, from the record)."""
    names = " and ".join(str(f.get("accountant")) for f in figures)
    text = (
        f"the record holds {framework}'s {names} figures, each computed by {framework}'s own "
        f"accountant from the history its engine recorded (noise multiplier, sample rate, "
        f"steps); the engine itself used its {accountant} accountant"
    )
    return f"{text}; {difference}" if difference else text


def framework_figures(
    framework: str, figures: Sequence[Mapping[str, Any]], delta: float | None
) -> str:
    """Each of the framework's own figures and how it relates to the certified bracket."""
    at = f" at δ = {fmt_exact(delta)}" if delta is not None else ""
    parts = []
    for f in figures:
        eps = f.get("epsilon")
        value = _epsilon_is(float(eps)) if isinstance(eps, int | float) else "not computed"
        parts.append(f"{f.get('accountant')} {value}: {f.get('comparison')}")
    return f"{framework}'s own figures (not certified by dpledger){at}: " + "; ".join(parts) + "."


def framework_figure(
    framework: str, accountant: str, epsilon: float | None, delta: float | None
) -> str:
    """The framework's own figure, said to be its own (dpledger certifies none of it)."""
    at = f" at δ = {fmt_exact(delta)}" if delta is not None else ""
    if epsilon is None:
        return f"{framework}'s own figure ({accountant} accountant): none recorded{at}."
    return (
        f"{framework}'s own figure ({accountant} accountant, not certified by dpledger): "
        f"ε = {fmt_exact(epsilon)}{at}."
    )

"""Report figures as PNG bytes: privacy profile, epsilon against steps, the composition graph.

matplotlib is imported lazily (only when a figure is drawn) and used through its
object-oriented API with the Agg canvas: no pyplot, no display, no global state. The numbers
come from the same accountants as the report: the profile is the selected backend's certified
``get_delta`` on a grid, and the steps curve re-accounts the pipeline with the most repeated
release cut to a few prefixes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import networkx as nx
import numpy as np

from dpledger.accountant.graph_account import account_graph
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_compositions import read_profile
from dpledger.accountant.select import account, backend_factories
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError
from dpledger.core.events import ComposedEvent, Event
from dpledger.report.numbers import fmt_exact, fmt_up
from dpledger.runtime.graph import CompositionGraph

if TYPE_CHECKING:
    from dpledger.report.build import BuiltReport

#: figure key -> caption (also the order in which reports show them)
CAPTIONS: dict[str, str] = {
    "privacy_profile": "Privacy profile δ(ε): certified upper bound",
    "epsilon_vs_steps": "Certified bound against the number of steps",
    "composition_graph": "Composition graph: sources, partitions, releases and lifts",
}
PROFILE_POINTS = 30
STEP_POINTS = 6
_KIND_COLOURS = {
    "source": "#4c72b0",
    "transform": "#dd8452",
    "release": "#55a868",
    "postprocess": "#8c8c8c",
}


@attrs.frozen
class Figure:
    key: str
    caption: str
    png: bytes


# -- data ------------------------------------------------------------------------------------
def accounted_events(built: BuiltReport) -> tuple[list[tuple[Event, Adjacency]], bool]:
    """The events whose worst case is the bound, and whether they are exact (not dominating)."""
    acc = built.account
    if len(acc.sources) == 1 or built.graph.disjoint_sources:
        return [
            (alt, s.reduction.unit_adjacency)
            for s in acc.sources
            for alt in s.reduction.alternatives
        ], True
    relation = acc.sources[0].reduction.adjacency.relation
    event = ComposedEvent(tuple(s.reduction.event for s in acc.sources))
    return [(event, Adjacency(relation=relation))], False


def _deltas(
    event: Event,
    adjacency: Adjacency,
    method: str,
    backends: Sequence[str] | None,
    grid: Sequence[float],
) -> list[float]:
    """Certified delta(epsilon) upper bounds of ``event`` by ``method`` at every epsilon of
    ``grid``: the PLD backend composes once and reads every point (``read_profile``); the
    others answer point by point."""
    for name, factory, _ in backend_factories([method]):
        if factory is None or name != method:
            continue
        acc = factory(adjacency)
        if acc.supports(event):
            acc.compose(event)
            read = read_profile(acc, grid) if isinstance(acc, PLDAccountant) else None
            return read if read is not None else [float(acc.get_delta(e).delta) for e in grid]
    names = list(backends) if backends is not None else None
    return [float(account(event, adjacency, epsilon=e, backends=names).bound.delta) for e in grid]


def profile_data(
    built: BuiltReport, points: int = PROFILE_POINTS
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(epsilons, certified deltas, exact) on a grid up to about twice the reported epsilon."""
    report = built.report
    eps_star = float(report.bound["epsilon"])
    top = max(2.0 * eps_star, 1.0) if math.isfinite(eps_star) else 10.0
    grid = np.linspace(0.0, top, points)
    events, exact = accounted_events(built)
    deltas = np.zeros(points)
    at = [float(e) for e in grid]
    for event, adj in events:
        found = _deltas(event, adj, report.accounting_method, built.backends, at)
        deltas = np.maximum(deltas, found)
    return grid, deltas, exact


def repeated_release(graph: CompositionGraph) -> tuple[str, int] | None:
    """The release with the largest ``count`` above 1 (ties: first id), if any."""
    best: tuple[str, int] | None = None
    for node in graph.nodes_of("release"):
        count = int(graph.g.nodes[node]["count"])
        if count > 1 and (best is None or count > best[1]):
            best = (node, count)
    return best


def step_counts(count: int, points: int = STEP_POINTS) -> list[int]:
    """A few step counts from 1 to ``count`` (geometric), always ending at ``count``."""
    raw = np.geomspace(1, count, num=min(points, count))
    return sorted({max(1, round(float(x))) for x in raw} | {count})


def steps_data(built: BuiltReport, points: int = STEP_POINTS) -> tuple[str, list[int], list[float]]:
    """(release id, step counts, certified bound after that many steps)."""
    found = repeated_release(built.graph)
    if found is None:
        raise DPLedgerError("no release is repeated (count > 1)")
    node, count = found
    key = "epsilon" if built.report.reports_epsilon else "delta"
    method = built.report.accounting_method
    counts = step_counts(count, points)
    values = []
    for n in counts:
        g = CompositionGraph(disjoint_sources=built.graph.disjoint_sources)
        g.g = built.graph.g.copy()
        g.g.nodes[node]["count"] = n
        try:
            acc = account_graph(g, delta=built.delta, epsilon=built.epsilon, backends=[method])
        except DPLedgerError:
            names = list(built.backends) if built.backends is not None else None
            acc = account_graph(g, delta=built.delta, epsilon=built.epsilon, backends=names)
        values.append(float(acc.bound.to_dict()[key]))
    return node, counts, values


# -- drawing ---------------------------------------------------------------------------------
def _new_figure(width: float, height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


#: colours of a figure's palette (a plot of a few colours on white: a quarter of the bytes of
#: the full-colour PNG, indistinguishable on screen)
PALETTE_COLOURS = 64


def _png(fig: Any) -> bytes:
    """The figure as a palette PNG (Pillow comes with matplotlib)."""
    from PIL import Image

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", metadata={"Software": None})
    buf.seek(0)
    with Image.open(buf) as image:
        quantized = image.convert("RGB").quantize(PALETTE_COLOURS, Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    quantized.save(out, format="PNG", optimize=True)
    return out.getvalue()


def draw_profile(built: BuiltReport) -> bytes:
    grid, deltas, exact = profile_data(built)
    fig, ax = _new_figure(6.0, 4.0)
    positive = deltas > 0
    ax.semilogy(
        grid[positive],
        deltas[positive],
        "-o",
        ms=3,
        color="#4c72b0",
        label=f"certified δ(ε), {built.report.accounting_method}"
        + ("" if exact else " (dominating event)"),
    )
    b = built.report.bound
    eps, delta = float(b["epsilon"]), float(b["delta"])
    if math.isfinite(eps) and delta > 0:
        ax.semilogy(
            [eps],
            [delta],
            "*",
            ms=12,
            color="#c44e52",
            label=f"reported (ε = {fmt_up(eps, 4)}, δ = {fmt_exact(delta)})",
        )
    ax.set_xlabel("ε")
    ax.set_ylabel("δ(ε) (upper bound)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def draw_steps(built: BuiltReport) -> bytes:
    node, counts, values = steps_data(built)
    q = "ε" if built.report.reports_epsilon else "δ"
    fig, ax = _new_figure(6.0, 4.0)
    ax.plot(
        counts,
        values,
        "-o",
        ms=4,
        color="#55a868",
        label=f"certified {q}, {built.report.accounting_method}",
    )
    ax.set_xscale("log")
    ax.set_xlabel(f"steps of release {node!r}")
    ax.set_ylabel(f"{q} (upper bound)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def _node_label(
    graph: CompositionGraph, node: str, notes: Sequence[str], rules: dict[str, tuple[str, ...]]
) -> str:
    d = graph.g.nodes[node]
    kind = d["node_kind"]
    if kind == "source":
        adj: Adjacency = d["adjacency"]
        unit = "row" if adj.unit == "row" else f"user ≤{adj.max_contributions}"
        return f"{node}\nsource, {unit}"
    if kind == "transform":
        t = d["transform"]
        if t == "partition":
            mode = (
                "parallel"
                if any(n.startswith(f"partition {node!r}") and "parallel" in n for n in notes)
                else "sequential"
            )
            cells = f", {d['cells']} cells" if d["cells"] is not None else ""
            if d.get("max_cells_per_unit") is not None:
                cells += f", ≤{d['max_cells_per_unit']} per unit"
            return f"{node}\npartition by {d['key']}{cells}\n{mode}"
        if t == "contribution_bound":
            return f"{node}\n≤{d['max_contributions']} per user"
        return f"{node}\ncell"
    if kind == "release":
        text = f"{node}\n×{d['count']}" if d["count"] != 1 else node
        lifts = [r for r in rules.get(node, ()) if r not in ("unchanged_k1", "compose_distributes")]
        return text + (f"\nlift: {', '.join(lifts)}" if lifts else "")
    return f"{node}\npost-processing"


def draw_graph(built: BuiltReport) -> bytes:
    graph = built.graph
    g = graph.g
    layers = list(nx.topological_generations(g))
    pos: dict[str, tuple[float, float]] = {}
    layer_of = {n: col for col, layer in enumerate(layers) for n in layer}
    for col, layer in enumerate(layers):
        members = sorted(layer)
        for i, node in enumerate(members):
            pos[node] = (float(col), (len(members) - 1) / 2.0 - i)
    notes = [n for s in built.account.sources for n in s.reduction.notes]
    rules = {r.release_id: r.rules for r in built.account.releases}
    height = max(3.0, 1.3 * max(len(layer) for layer in layers))
    fig, ax = _new_figure(max(6.0, 2.4 * len(layers)), height)
    data_kinds = ("source", "transform")
    for u, v in sorted(g.edges):
        side = g.nodes[u]["node_kind"] not in data_kinds and g.nodes[v]["node_kind"] == "release"
        skip = layer_of[v] - layer_of[u] > 1
        ax.annotate(
            "",
            xy=pos[v],
            xytext=pos[u],
            arrowprops={
                "arrowstyle": "-|>",
                "color": "#999999" if side else "#444444",
                "linestyle": "--" if side else "-",
                "shrinkA": 22,
                "shrinkB": 22,
                "connectionstyle": f"arc3,rad={-0.35 if skip else 0.0}",
            },
        )
    for node in sorted(g.nodes):
        kind = g.nodes[node]["node_kind"]
        x, y = pos[node]
        ax.scatter(
            [x],
            [y],
            s=900,
            color=_KIND_COLOURS[kind],
            zorder=2,
            marker="s" if kind in data_kinds else "o",
        )
        ax.text(
            x,
            y - 0.32,
            _node_label(graph, node, notes, rules),
            ha="center",
            va="top",
            fontsize=7,
            zorder=3,
        )
    for kind, colour in _KIND_COLOURS.items():
        ax.scatter([], [], color=colour, label=kind)
    ax.legend(fontsize=7, loc="upper right", frameon=False)
    ax.set_xlim(-0.7, len(layers) - 0.3)
    ys = [p[1] for p in pos.values()]
    ax.set_ylim(min(ys) - 1.2, max(ys) + 0.7)
    ax.axis("off")
    ax.set_title("data flow (solid) and side information (dashed)", fontsize=8)
    return _png(fig)


#: the one line printed when figures cannot be drawn
NO_MATPLOTLIB = (
    "figures skipped: matplotlib is not installed. Fix: pip install "
    "'dpledger[reports]' (the report itself is complete without them)"
)


def figures_available() -> bool:
    """Whether matplotlib can be imported (figures are optional)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def make_figures(built: BuiltReport, progress: Callable[[str], None] | None = None) -> list[Figure]:
    """Every figure that applies (the steps curve needs a repeated release)."""
    out = []
    drawers: list[tuple[str, Callable[[BuiltReport], bytes]]] = [
        ("privacy_profile", draw_profile),
        ("epsilon_vs_steps", draw_steps),
        ("composition_graph", draw_graph),
    ]
    for key, draw in drawers:
        if progress is not None:
            progress(key)
        if key == "epsilon_vs_steps" and repeated_release(built.graph) is None:
            continue
        if key == "privacy_profile" and not math.isfinite(float(built.report.bound["epsilon"])):
            continue
        out.append(Figure(key, CAPTIONS[key], draw(built)))
    return out

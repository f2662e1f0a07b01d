"""Reports of a run dpledger observed (an Opacus training loop): no verified ledger, seed file or
noise generator of dpledger's is claimed, and Opacus's own figure stands beside the certified
bracket with the record's explanation; a run made under the ledger still says it was verified."""

from __future__ import annotations

import html
import json
from pathlib import Path

import attrs
import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.cleanroom.verify_room import OBSERVED_METHODS as ROOM_OBSERVED
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, GaussianEvent, SelfComposedEvent, ShuffledBatchesEvent
from dpledger.integrations.opacus import (
    METHOD,
    SHUFFLED,
    Batching,
    OpacusResult,
    explain,
    write_run,
)
from dpledger.integrations.opacus_figures import (
    OpacusFigure,
    comparison,
    difference,
    grouped,
    opacus_figures,
)
from dpledger.report import render_html, render_json, render_markdown, report_input
from dpledger.report.model import PrivacyReport
from dpledger.report.numbers import fmt_down
from dpledger.report.prose import framework_figures
from dpledger.report.render_md import sentence
from dpledger.report.run_dir import OBSERVED_METHODS
from dpledger.runtime import session
from dpledger.runtime.plugin_manager import PluginHost
from dpledger.runtime.run_dir import write_run_dir

DELTA = 1e-5
#: a tiny shuffled-batch run: 40 records, batches of 20, noise multiplier 2 (two steps an epoch)
N, B, SIGMA = 40, 20, 2.0
#: Opacus's own figure (its prv accountant's, for Poisson sampling at q = 0.5): below the
#: certified lower bound of the shuffled run
OPACUS = 1.67
FORMATS = ("md", "html", "json")


def _result(epochs: int, complete: int, backends: list[str] | None = None) -> OpacusResult:
    """What the Opacus tracker returns for a shuffled run (without training a model), its upper
    bound taken over ``backends`` (default: all)."""
    batching = Batching(SHUFFLED, N, N // B, batch_size=B)
    one = ShuffledBatchesEvent(N, B, GaussianEvent(SIGMA))
    event: Event = one if epochs == 1 else SelfComposedEvent(one, epochs)
    lower_event = one if complete == 1 else event
    adjacency = batching.adjacency
    selection = select.account(event, adjacency, delta=DELTA, backends=backends)
    upper = float(selection.bound.epsilon)
    lower = float(select.account(lower_event, adjacency, delta=DELTA).bound.epsilon_lower)
    status, line = explain(batching, upper, lower, OPACUS, "prv", B / N)
    return OpacusResult(
        delta=DELTA,
        batching=batching,
        steps=epochs * (N // B),
        noise_multipliers=(SIGMA,),
        max_grad_norms=(1.0,),
        epochs=epochs,
        complete_epochs=complete,
        event=event,
        lower_event=lower_event,
        adjacency=adjacency,
        epsilon=upper,
        epsilon_lower=lower,
        method=selection.bound.method,
        selection=selection,
        opacus_epsilon=OPACUS,
        opacus_accountant="prv",
        opacus_history=((SIGMA, B / N, epochs * (N // B)),),
        opacus_status=status,
        explanation=line,
    )


def _texts(report: PrivacyReport) -> dict[str, str]:
    return {
        "md": render_markdown(report),
        "html": render_html(report),
        "json": render_json(report),
    }


@pytest.fixture(scope="module")
def shuffled(tmp_path_factory: pytest.TempPathFactory) -> tuple[OpacusResult, dict[str, str]]:
    result = _result(epochs=1, complete=1)
    run = write_run(tmp_path_factory.mktemp("opacus") / "run", result)
    return result, _texts(report_input(run).report)


def _in(text: str, fmt: str, sentence: str) -> bool:
    return (html.escape(sentence, quote=True) if fmt == "html" else sentence) in text


# -- what an observed run's report states --------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_opacus_s_figure_stands_beside_the_bracket(
    shuffled: tuple[OpacusResult, dict[str, str]], fmt: str
) -> None:
    _, texts = shuffled
    figure = (
        "Opacus's own figure (prv accountant, not certified by dpledger): ε = 1.67 at δ = 1e-05."
    )
    assert _in(texts[fmt], fmt, figure)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_record_s_explanation_is_shown(
    shuffled: tuple[OpacusResult, dict[str, str]], fmt: str
) -> None:
    result, texts = shuffled
    assert "Opacus's 1.67 is below the certified lower bound" in result.explanation
    assert _in(texts[fmt], fmt, result.explanation)


def test_the_figure_and_explanation_follow_the_bracket(
    shuffled: tuple[OpacusResult, dict[str, str]],
) -> None:
    result, texts = shuffled
    md = texts["md"]
    bracket = md.index("Certified bracket:")
    assert bracket < md.index("Opacus's own figure") < md.index(result.explanation)
    assert md.index(result.explanation) < md.index("## DP setting")


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_report_says_which_opacus_accountant_the_record_holds(
    shuffled: tuple[OpacusResult, dict[str, str]], fmt: str
) -> None:
    _, texts = shuffled
    held = (
        "the record holds Opacus's prv figure only; Opacus's rdp figure was not computed for "
        "this run"
    )
    assert _in(texts[fmt], fmt, held)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_run_is_said_to_be_observed(
    shuffled: tuple[OpacusResult, dict[str, str]], fmt: str
) -> None:
    _, texts = shuffled
    assert "observed, not run under the dpledger ledger" in texts[fmt]


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_verified_ledger_is_claimed(
    shuffled: tuple[OpacusResult, dict[str, str]], fmt: str
) -> None:
    assert "ledger verified" not in shuffled[1][fmt]


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_seed_file_is_claimed(shuffled: tuple[OpacusResult, dict[str, str]], fmt: str) -> None:
    assert "private diagnostics" not in shuffled[1][fmt]


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_numpy_generator_is_claimed(
    shuffled: tuple[OpacusResult, dict[str, str]], fmt: str
) -> None:
    assert "numpy generator" not in shuffled[1][fmt]


def test_the_json_report_carries_opacus_s_numbers(
    shuffled: tuple[OpacusResult, dict[str, str]],
) -> None:
    result, texts = shuffled
    runtime = json.loads(texts["json"])["runtime"]
    observed = runtime["observed"]
    assert (observed["framework"], observed["accountant"]) == ("Opacus", "prv")
    assert (observed["epsilon"], observed["delta"]) == (OPACUS, DELTA)
    assert observed["explanation"] == result.explanation
    assert "verified" not in runtime and "seed" not in runtime
    assert "bracket_note" not in observed  # the run's bracket is the report's


def test_a_partial_epoch_names_the_lower_bound_of_what_ran(tmp_path: Path) -> None:
    # two epochs, the second cut short: the upper bound counts it in full, the lower leaves it
    # out (RDP gives the upper bound of two epochs at once; PLD's takes seconds)
    result = _result(epochs=2, complete=1, backends=["rdp"])
    run = write_run(tmp_path / "run", result)
    report = report_input(run, backends=["rdp"], brackets=False).report
    assert report.runtime is not None
    note = report.runtime["observed"]["bracket_note"]
    assert f"the certified lower bound for what ran is ε ≥ {fmt_down(result.epsilon_lower)}" in note
    assert sentence(note) in render_markdown(report)


def test_the_observed_methods_are_the_clean_room_s() -> None:
    assert set(OBSERVED_METHODS) == set(ROOM_OBSERVED) == {METHOD}


# -- a run made under the ledger ------------------------------------------------------------------
def test_a_dpledger_run_still_says_verified(tmp_path: Path) -> None:
    host = PluginHost.create(builtin_only=True)
    spec = host.method("gaussian_mechanism")
    params = spec.make_params({"sensitivity": 1.0, "noise_multiplier": 2.0})
    plan = session.plan(spec, params, Adjacency(), host.lower, delta=DELTA)
    result = session.execute(plan.declared, np.arange(5.0), seed=7)
    out = tmp_path / "run"
    write_run_dir(out, result.outputs, session.record(plan, result), {"seed": 7})
    report = report_input(out, brackets=False).report
    md = render_markdown(report)
    assert "- ledger verified (every executed step covered by the declaration): yes" in md
    assert "- seed: not published (private diagnostics)" in md
    assert "numpy generator" in md
    assert "observed" not in md


# -- a record holding both of Opacus's accountants' figures ----------------------------------------
#: Opacus's prv and rdp figures on the shuffled run's history (as Opacus's accountants give them)
BOTH = {"prv": OPACUS, "rdp": 1.83}


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[OpacusResult, dict[str, str]]:
    base = _result(epochs=1, complete=1)
    figures = tuple(
        OpacusFigure(
            name,
            eps,
            comparison(base.batching, base.epsilon_lower, base.epsilon, eps, B / N),
        )
        for name, eps in BOTH.items()
    )
    result = attrs.evolve(base, opacus_figures=figures, opacus_difference=difference(figures))
    run = write_run(tmp_path_factory.mktemp("opacus") / "run", result)
    return result, _texts(report_input(run).report)


@pytest.mark.parametrize("fmt", FORMATS)
def test_both_figures_stand_beside_the_bracket_with_their_conditions(
    both: tuple[OpacusResult, dict[str, str]], fmt: str
) -> None:
    result, texts = both
    for f in result.opacus_figures:
        sentence = f"{f.accountant} ε = {f.epsilon:g}: {f.comparison}"
        assert _in(texts[fmt], fmt, sentence)
        # what each sentence claims holds of the record's numbers
        assert f.epsilon is not None
        assert ("did not run" in f.comparison) == (result.batching.kind != "poisson")
        below = "below the certified lower bound" in f.comparison
        assert below == (f.epsilon < result.epsilon_lower)
    assert _in(texts[fmt], fmt, "the record holds Opacus's prv and rdp figures")
    assert _in(texts[fmt], fmt, result.opacus_difference)
    assert "not computed for this run" not in texts[fmt]


def test_the_difference_sentence_follows_the_figures() -> None:
    def figs(prv: float, rdp: float) -> tuple[OpacusFigure, ...]:
        return (OpacusFigure("prv", prv, ""), OpacusFigure("rdp", rdp, ""))

    assert difference(figs(1.0, 1.2)).startswith("Opacus's rdp figure is 20.0% above")
    assert difference(figs(1.2, 1.0)).startswith("Opacus's rdp figure is 16.7% below")
    assert "agree within 0.1%" in difference(figs(1.0, 1.0005))
    assert difference((OpacusFigure("prv", 1.0, ""), OpacusFigure("rdp", None, "x"))) == ""


def test_each_comparison_states_its_condition() -> None:
    poisson = Batching("poisson", N, 1, sample_rate=0.5)
    lower, upper = 1.0, 2.0
    assert "below the certified lower bound" in comparison(poisson, lower, upper, 0.9, 0.5)
    assert "within 1.0%" in comparison(poisson, lower, upper, 1.98, 0.5)
    assert "5.0% above the certified upper bound" in comparison(poisson, lower, upper, 2.1, 0.5)
    assert comparison(poisson, lower, upper, 1.5, 0.5) == "inside the certified bracket"
    shuffled = Batching(SHUFFLED, N, N // B, batch_size=B)
    text = comparison(shuffled, lower, upper, 1.5, 0.5)
    assert text == "for Poisson sampling at q=0.5, which did not run"


def test_a_figure_opacus_is_not_asked_for_says_why() -> None:
    # 65 distinct noise multipliers: beyond what the tracker asks Opacus's accountants for
    history = [(1.0 + i / 100, 0.5, 1) for i in range(65)]
    shuffled = Batching(SHUFFLED, N, N // B, batch_size=B)
    figures = opacus_figures(history, DELTA, shuffled, 1.0, 2.0, None, known=("prv", 3.0))
    prv, rdp = figures
    assert (prv.epsilon, prv.error) == (3.0, "")  # the engine's own figure, as the engine gave it
    assert rdp.epsilon is None and "65 distinct" in rdp.error and rdp.comparison == rdp.error
    assert difference(figures) == ""
    text = framework_figures("Opacus", [f.to_dict() for f in figures], DELTA)
    assert f"rdp not computed: {rdp.error}" in text


def test_steps_of_equal_parameters_are_counted_together() -> None:
    history = [(1.0, 0.1, 3), (0.5, 0.1, 1), (1.0, 0.1, 2), (1.0, 0.2, 1)]
    assert grouped(history) == [(1.0, 0.1, 5), (0.5, 0.1, 1), (1.0, 0.2, 1)]

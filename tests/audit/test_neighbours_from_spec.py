"""Each method names its own neighbouring-dataset rule; the audit knows no method by name.

``MethodSpec(neighbours=rule)`` is the rule ``dpledger audit METHOD`` builds ``(D, D')`` with;
a spec without one gets the generic per-record canary. Every builtin plugin names its rule in
its spec, and no module of :mod:`dpledger.audit` names a builtin method.
"""

from __future__ import annotations

import ast
import re
import tokenize
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.audit import neighbours as nb
from dpledger.audit.auditor import NO_VIOLATION
from dpledger.audit.method_audit import audit_method
from dpledger.core import neighbours as core_neighbours
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, PluginError
from dpledger.core.events import Event, GaussianEvent
from dpledger.core.specs import MethodSpec
from dpledger.core.validation import positive_finite
from dpledger.runtime import neighbour_rules
from dpledger.runtime.ledger import PrivacyLedger
from dpledger.runtime.plugin_manager import PluginHost

AUDIT = Path(nb.__file__).parent
ADD = Adjacency()
#: the rule each builtin method names in its spec (a method not listed uses the generic one)
BUILTIN_RULES = {
    "gaussian_mechanism": neighbour_rules.query_answer,
    "laplace_mechanism": neighbour_rules.query_answer,
    "exponential_mechanism": neighbour_rules.score_vector,
    "report_noisy_max": neighbour_rules.score_vector,
    "noisy_top_k": neighbour_rules.score_vector,
    "nn_vote_selection": neighbour_rules.nn_records,
    "trajectories": neighbour_rules.ball_marginals,
    "shk": neighbour_rules.circle_antipode,
    "path": neighbour_rules.user_tables,
    "direct": neighbour_rules.user_tables,
    "aim": neighbour_rules.user_tables,
    "aggregate": neighbour_rules.unit_rows,
}


# -- a method whose data is a query answer of stated sensitivity, with its own rule ---------------
@attrs.frozen
class AnswerParams:
    sensitivity: float = attrs.field(default=1.0, validator=positive_finite)
    noise_multiplier: float = attrs.field(default=1.0, validator=positive_finite)


def _declare(params: AnswerParams, adjacency: Adjacency) -> Event:
    return GaussianEvent(params.noise_multiplier)


def _release(
    params: AnswerParams, data: Any, ledger: PrivacyLedger, rng: np.random.Generator
) -> dict[str, Any]:
    answer = np.atleast_1d(np.asarray(data, dtype=float))
    return {
        "answer": ledger.gaussian(answer, params.sensitivity, params.noise_multiplier, step="q")
    }


def moved_answer(params: AnswerParams, data: Any, adjacency: Adjacency) -> nb.NeighbourPair:
    """The answer and the answer moved by the stated sensitivity (twice under replace-one)."""
    answer = np.atleast_1d(np.asarray(data, dtype=float))
    shift = adjacency.sensitivity_factor * params.sensitivity
    return nb.NeighbourPair(
        answer, answer + shift, adjacency.relation, f"own rule: the answer moved by {shift:g}"
    )


def _spec(**extra: Any) -> MethodSpec:
    return MethodSpec(
        name="own_answer",
        params=AnswerParams,
        declare=_declare,
        run=_release,
        description="a query answer with Gaussian noise",
        proof="Balle & Wang 2018, Theorem 8",
        **extra,
    )


def test_the_audit_builds_neighbours_with_the_specs_rule() -> None:
    spec = _spec(neighbours=moved_answer)
    params = AnswerParams(sensitivity=0.5)
    pair = nb.build_neighbours(spec, params, np.array([3.0]), ADD)
    assert (
        pair.d_prime.tolist() == [3.5] and pair.description == "own rule: the answer moved by 0.5"
    )
    result = audit_method(
        spec, params, np.array([3.0]), relation="both", runs=200, deltas=(1e-3,), seed=0
    )
    assert [r.relation for r in result.relations] == ["add_remove", "replace_one"]
    assert [r.neighbours for r in result.relations] == [
        "own rule: the answer moved by 0.5",
        "own rule: the answer moved by 1",
    ]
    assert result.verdict == NO_VIOLATION
    assert result.to_dict()["relations"][0]["neighbours"] == "own rule: the answer moved by 0.5"


def test_a_spec_without_a_rule_gets_the_generic_canary() -> None:
    spec = _spec()
    assert spec.neighbours is None and nb.rule_for(spec) is neighbour_rules.per_record
    pair = nb.build_neighbours(spec, AnswerParams(), np.array([3.0, 1.0]), ADD)
    assert pair.description.startswith("D = data, D' = data + canary")


def test_the_rule_is_validated_and_its_result_checked() -> None:
    with pytest.raises(InvalidParameterError, match="neighbours: must be callable"):
        _spec(neighbours="moved_answer")
    spec = _spec(neighbours=lambda params, data, adjacency: (data, data))
    with pytest.raises(PluginError, match="'own_answer': its neighbour rule returned tuple"):
        nb.build_neighbours(spec, AnswerParams(), np.zeros(1), ADD)
    with pytest.raises(InvalidParameterError, match="auditing 'own_answer' needs the data"):
        nb.build_neighbours(spec, AnswerParams(), None, ADD)


def test_a_registered_rule_is_deprecated_and_still_takes_precedence() -> None:
    spec = _spec(neighbours=moved_answer)

    def plus_two(params: Any, data: Any, adjacency: Adjacency) -> nb.NeighbourPair:
        return nb.NeighbourPair(data, data + 2, adjacency.relation, "plus two")

    with pytest.warns(DeprecationWarning, match="neighbours=rule"):
        nb.register_neighbour_rule(spec.name, plus_two)
    try:
        assert nb.build_neighbours(spec, AnswerParams(), np.zeros(1), ADD).description == (
            "plus two"
        )
    finally:
        nb.unregister_neighbour_rule(spec.name)
    assert nb.rule_for(spec) is moved_answer


def test_old_imports_are_the_moved_objects() -> None:
    assert nb.NeighbourPair is core_neighbours.NeighbourPair
    assert nb.NeighbourRule is core_neighbours.NeighbourRule
    for name in neighbour_rules.__all__:
        assert getattr(nb, name) is getattr(neighbour_rules, name), name
    assert nb.scores is neighbour_rules.score_vector


def test_every_builtin_method_names_its_rule_in_its_spec() -> None:
    methods = PluginHost().methods()
    assert set(BUILTIN_RULES) <= set(methods)
    for name, spec in methods.items():
        assert spec.neighbours is BUILTIN_RULES.get(name), name


# -- the audit names no builtin method -------------------------------------------------------------
def _texts(path: Path) -> list[tuple[int, str]]:
    """Every string constant (docstrings and f-string parts included) and comment of ``path``."""
    source = path.read_text()
    out = [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source, filename=str(path)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    with path.open("rb") as handle:
        out += [
            (tok.start[0], tok.string)
            for tok in tokenize.tokenize(handle.readline)
            if tok.type == tokenize.COMMENT
        ]
    return out


def builtin_names_in(path: Path, names: set[str]) -> list[str]:
    """Where ``path`` names a method of ``names``: a string equal to the name, a quoted name
    inside a text, or (for names with ``_`` or ``-``, which are no English words) the word."""
    found = []
    for line, text in _texts(path):
        for name in sorted(names):
            quoted = re.search(rf"['\"`]{re.escape(name)}['\"`]", text)
            word = bool(re.search(r"[_\-]", name)) and re.search(
                rf"(?<![\w\-]){re.escape(name)}(?![\w\-])", text
            )
            if text == name or quoted or word:
                found.append(f"{path.name}:{line}: {name}")
    return found


def test_the_audit_names_no_builtin_method() -> None:
    names = set(PluginHost().methods())
    assert {"gaussian_mechanism", "shk", "path"} <= names
    modules = sorted(AUDIT.glob("*.py"))
    assert AUDIT / "neighbours.py" in modules and AUDIT / "method_audit.py" in modules
    found = [hit for path in modules for hit in builtin_names_in(path, names)]
    assert not found, "dpledger/audit names builtin methods (a spec names its rule):\n" + (
        "\n".join(found)
    )


def test_the_name_check_catches_a_rule_table(tmp_path: Path) -> None:
    path = tmp_path / "rules.py"
    path.write_text(
        '"""Rules."""\nRULES = {"shk": 1}  # gaussian_mechanism\nTEXT = f"see {1}: \'path\'"\n'
    )
    names = {"shk", "gaussian_mechanism", "path", "direct"}
    assert sorted(builtin_names_in(path, names)) == [
        "rules.py:2: gaussian_mechanism",
        "rules.py:2: shk",
        "rules.py:3: path",
    ]

"""The runtime ledger's companion modules use only its public scope API, and the ledger's own
interface (what plugins call) is unchanged by the split."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.errors import LedgerViolationError, PluginError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpledger.runtime import ledger as ledger_module
from dpledger.runtime.ledger import PrivacyLedger

RUNTIME = Path(ledger_module.__file__).resolve().parent
COMPANIONS = sorted(RUNTIME.glob("ledger_*.py"))
#: names under which the companion modules hold a ledger
LEDGER_NAMES = frozenset({"ledger", "_ledger"})


def _is_ledger(node: ast.expr, names: set[str]) -> bool:
    """Whether ``node`` denotes a ledger: a name bound to one, or an attribute holding one."""
    if isinstance(node, ast.Name):
        return node.id in names
    return isinstance(node, ast.Attribute) and node.attr in LEDGER_NAMES


def _ledger_names(tree: ast.AST) -> set[str]:
    """``ledger`` and every argument or variable annotated as a ``PrivacyLedger``."""
    names = {"ledger"}
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            target = node.arg if isinstance(node, ast.arg) else getattr(node.target, "id", "")
            if "PrivacyLedger" in ast.unparse(node.annotation):
                names.add(target)
    return names


def private_ledger_accesses(source: str) -> list[str]:
    """``line: expression`` of every access to a private member (``_x``) of a ledger."""
    tree = ast.parse(source)
    names = _ledger_names(tree)
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and _is_ledger(node.value, names)
        ):
            found.append((node.lineno, node.col_offset, ast.unparse(node)))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "delattr", "hasattr")
            and node.args
            and _is_ledger(node.args[0], names)
        ):
            found.append((node.lineno, node.col_offset, ast.unparse(node)))
    return [f"{line}: {text}" for line, _, text in sorted(found)]


def test_the_ledger_has_its_companion_modules() -> None:
    assert {p.stem for p in COMPANIONS} >= {
        "ledger_arguments",
        "ledger_noise",
        "ledger_sampling",
        "ledger_selection",
        "ledger_units",
    }


@pytest.mark.parametrize("path", COMPANIONS, ids=lambda p: p.stem)
def test_companions_touch_no_private_member_of_the_ledger(path: Path) -> None:
    found = private_ledger_accesses(path.read_text(encoding="utf-8"))
    assert not found, f"{path.name} reaches into the ledger (use its scope API):\n" + "\n".join(
        found
    )


def test_the_check_catches_private_accesses() -> None:
    source = (
        "def f(ledger, led: PrivacyLedger, epoch):\n"
        "    ledger._entries.append(1)\n"
        "    led._scopes.pop()\n"
        "    epoch._ledger._counts.clear()\n"
        "    getattr(ledger, '_units')\n"
        "    epoch._index = ledger.book_entry(1)\n"  # the epoch's own member: allowed
        "    ledger.log.append(1)\n"
    )
    assert private_ledger_accesses(source) == [
        "2: ledger._entries",
        "3: led._scopes",
        "4: epoch._ledger._counts",
        "5: getattr(ledger, '_units')",
    ]


#: the methods plugins call, with their signatures before the split
PRIMITIVES = {
    "allocate": "(self, n: 'int', t: 'int', k: 'int' = 1, *, step: 'str') -> 'AllocatedEpoch'",
    "bound_units": (
        "(self, max_contributions: 'Any', *old: 'Any', rows: 'Any' = None, "
        "part: 'int | None' = None, step: 'str' = 'bound_units') -> 'NDArray[np.int64]'"
    ),
    "charge": "(self, event: 'Event', *, step: 'str', reason: 'str' = '') -> 'None'",
    "clip_rows_l2": "(self, x: 'Any', bound: 'float', *, step: 'str' = 'clip') -> 'FloatArray'",
    "clipped_sum_gaussian": (
        "(self, contributions: 'Any', clip_norm: 'float', noise_multiplier: 'float', *, "
        "step: 'str', per_unit: 'bool' = False, rows: 'Any' = None, "
        "part: 'int | None' = None, unit_keys: 'Any' = None) -> 'Any'"
    ),
    "clipped_sum_laplace": (
        "(self, contributions: 'Any', clip_norm: 'float', noise_multiplier: 'float', *, "
        "step: 'str', per_unit: 'bool' = False, rows: 'Any' = None, "
        "part: 'int | None' = None, unit_keys: 'Any' = None) -> 'Any'"
    ),
    "exponential_mechanism": (
        "(self, scores: 'Any', sensitivity: 'float', epsilon: 'float', *, step: 'str', "
        "monotonic: 'bool' = False) -> 'int'"
    ),
    "gaussian": (
        "(self, values: 'Any', sensitivity: 'float', noise_multiplier: 'float', *, "
        "step: 'str') -> 'Any'"
    ),
    "laplace": (
        "(self, values: 'Any', sensitivity: 'float', noise_multiplier: 'float', *, "
        "step: 'str') -> 'Any'"
    ),
    "noisy_top_k": (
        "(self, scores: 'Any', sensitivity: 'float', epsilon: 'float', k: 'int', *, "
        "step: 'str', monotonic: 'bool' = False) -> 'NDArray[np.int64]'"
    ),
    "poisson_sample": "(self, n: 'int', q: 'float', *, step: 'str') -> 'Sample'",
    "report_noisy_max": (
        "(self, scores: 'Any', sensitivity: 'float', epsilon: 'float', *, step: 'str', "
        "monotonic: 'bool' = False) -> 'int'"
    ),
    "sample_certified": (
        "(self, sampler: 'Callable[[np.random.Generator], Any]', event: 'Event', *, "
        "step: 'str', note: 'str' = '') -> 'Any'"
    ),
    "sample_without_replacement": "(self, n: 'int', m: 'int', *, step: 'str') -> 'Sample'",
    "shuffle_batches": "(self, n: 'int', batch_size: 'int', *, step: 'str') -> 'ShuffledEpoch'",
}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitives_stay_methods_of_the_ledger_with_their_signatures(name: str) -> None:
    # defined on the class itself: the integrity guard and the tests restore them by name
    method = vars(PrivacyLedger)[name]
    assert str(inspect.signature(method)) == PRIMITIVES[name]
    assert method.__doc__


def test_every_name_of_the_ledger_module_still_imports() -> None:
    from dpledger.runtime.ledger import (  # noqa: F401
        AllocatedEpoch,
        FloatArray,
        PrivacyLedger,
        Sample,
        ShuffledBatch,
        ShuffledEpoch,
        make_rng,
        selection_epsilon,
    )

    assert set(ledger_module.__all__) >= {
        "AllocatedEpoch",
        "PrivacyLedger",
        "Sample",
        "ShuffledBatch",
        "ShuffledEpoch",
        "make_rng",
        "selection_epsilon",
    }


# -- the scope API ----------------------------------------------------------------------------
def test_book_checks_logs_and_books() -> None:
    ledger = PrivacyLedger(ComposedEvent([GaussianEvent(2.0), LaplaceEvent(1.0)]), rng=0)
    ledger.book(GaussianEvent(2.0), "g", {"note": "x"})
    assert ledger.log == [{"step": "g", "event": GaussianEvent(2.0).to_dict(), "note": "x"}]
    ledger.check(LaplaceEvent(1.0), "l")  # checks only: nothing booked
    assert len(ledger.log) == 1
    with pytest.raises(LedgerViolationError, match="step 'g2'"):
        ledger.check(GaussianEvent(1.0), "g2")
    with pytest.raises(LedgerViolationError, match="step 'g3'"):
        ledger.book(GaussianEvent(2.0), "g3", {})
    assert len(ledger.log) == 1
    ledger.book(LaplaceEvent(1.0), "l", {})
    ledger.verify()
    assert ledger.matches_exactly()


def test_scopes_open_and_close_in_order() -> None:
    declared = SelfComposedEvent(PoissonSampledEvent(0.5, GaussianEvent(1.0)), 2)
    ledger = PrivacyLedger(declared, rng=0)
    outer = ledger.poisson_sample(10, 0.5, step="outer")
    assert ledger.open_scopes == ()
    with outer:
        assert ledger.open_scopes == (outer,)
        inner = ledger.poisson_sample(10, 0.5, step="inner")
        inner.__enter__()
        assert ledger.open_scopes == (outer, inner)
        with pytest.raises(PluginError, match="sample 'outer' closed out of order"):
            ledger.close_scope(outer)
        inner.__exit__(None, None, None)
    assert ledger.open_scopes == ()


def test_open_scopes_are_a_snapshot() -> None:
    ledger = PrivacyLedger(PoissonSampledEvent(0.5, GaussianEvent(1.0)), rng=0)
    with ledger.poisson_sample(10, 0.5, step="s"):
        scopes = ledger.open_scopes
        assert isinstance(scopes, tuple) and len(scopes) == 1
    assert len(scopes) == 1 and ledger.open_scopes == ()


def test_commit_books_into_the_innermost_scope() -> None:
    ledger = PrivacyLedger(PoissonSampledEvent(0.5, GaussianEvent(1.0)), rng=0)
    with ledger.poisson_sample(10, 0.5, step="s"):
        ledger.commit(GaussianEvent(1.0))
        assert ledger.executed_event() == ComposedEvent(
            [PoissonSampledEvent(0.5, GaussianEvent(1.0))]
        )
    ledger.verify()


def test_book_entry_books_again_in_place() -> None:
    ledger = PrivacyLedger(GaussianEvent(1.0), rng=0)
    index = ledger.book_entry(GaussianEvent(0.5))
    with pytest.raises(LedgerViolationError):
        ledger.verify()
    assert ledger.book_entry(GaussianEvent(1.0), index) == index
    ledger.verify()
    assert ledger.executed_event() == ComposedEvent([GaussianEvent(1.0)])
    with pytest.raises(LedgerViolationError):  # the counts follow the entry booked in place
        ledger.check(GaussianEvent(1.0), "more")


def test_clip_and_unit_bound_in_force() -> None:
    ledger = PrivacyLedger(GaussianEvent(1.0), rng=0)
    assert ledger.clip_in_force is None and ledger.rows_per_unit is None
    ledger.clip_rows_l2(np.ones((3, 2)), 2.0, step="clip")
    assert ledger.clip_in_force == (2.0, "clip")
    ledger.enforce_unit("per-unit sum")
    assert ledger.rows_per_unit is None and ledger.unit_steps == ["per-unit sum"]
    ledger.enforce_unit("b1", rows_per_unit=3)
    ledger.enforce_unit("b2", rows_per_unit=2)  # the largest bound stays in force
    assert ledger.rows_per_unit == 3
    assert ledger.unit_steps == ["per-unit sum", "b1", "b2"]


def test_a_user_level_bound_in_force_scales_a_later_step() -> None:
    adjacency = Adjacency(unit="user", unit_key="user")
    ledger = PrivacyLedger(Declaration(GaussianEvent(1.0), "user"), adjacency, rng=0)
    ledger.enforce_unit("bound", rows_per_unit=2)
    with pytest.raises(LedgerViolationError, match="up to 2 rows"):
        ledger.gaussian(0.0, 1.0, 1.0, step="g")  # booked at noise multiplier 1/2
    ledger.gaussian(0.0, 1.0, 2.0, step="g")
    ledger.verify()


def test_a_noted_poisson_draw_is_stated_as_declared() -> None:
    declared = PoissonSampledEvent(0.5, GaussianEvent(1.0))
    ledger = PrivacyLedger(declared, rng=0)
    ledger.note_poisson_draw(0.25)
    assert ledger.public_executed_event() == ComposedEvent(
        [PoissonSampledEvent(0.25, GaussianEvent(1.0))]
    )

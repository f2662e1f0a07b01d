"""``dpledger.core.events`` holds the event classes and re-exports the modules split from it."""

from __future__ import annotations

import subprocess
import sys

import attrs
import pytest

import dpledger.core.events as events
from dpledger.core import event_curves, event_kinds, event_nesting, event_parser, event_trees

HOMES = (event_curves, event_kinds, event_nesting, event_parser, event_trees)


def test_every_exported_name_is_the_object_of_its_home_module() -> None:
    homes = {name: module for module in HOMES for name in module.__all__}
    for name in events.__all__:
        value = getattr(events, name)
        if name in homes:
            assert value is getattr(homes[name], name), name
        else:
            assert getattr(value, "__module__", events.__name__) == events.__name__, name


def test_the_facade_exports_every_name_of_the_split_modules() -> None:
    split = {name for module in HOMES for name in module.__all__}
    private = {
        "check_nesting",
        "check_number_table",
        "float_tuple",
        "optional_numbers",
        "profile_table_validator",
        "rdp_table_validator",
    }
    assert split - private <= set(events.__all__)


def test_star_import_gives_the_tree_operations() -> None:
    namespace: dict[str, object] = {}
    exec("from dpledger.core.events import *", namespace)
    assert namespace["flatten"] is event_trees.flatten
    assert namespace["pure_epsilon"] is event_trees.pure_epsilon


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchEvent'"):
        _ = events.NoSuchEvent  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "statement",
    [
        "from dpledger.core.event_parser import event_from_dict as f\n"
        "print(f({'kind': 'gaussian', 'noise_multiplier': 2}).describe())",
        "from dpledger.core.event_kinds import EVENT_KINDS\nprint(EVENT_KINDS['gaussian'].kind)",
        "from dpledger.core.event_trees import flatten\n"
        "from dpledger.core.events import GaussianEvent as G, SelfComposedEvent as S\n"
        "print(flatten(S(G(2.0), 3))[0][1])",
    ],
)
def test_each_module_works_when_imported_first(statement: str) -> None:
    """Imported before ``dpledger.core.events``, a split module still sees the core classes."""
    res = subprocess.run(
        [sys.executable, "-c", statement], capture_output=True, text=True, check=False
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() in {"gaussian(noise_multiplier=2.0)", "gaussian", "3"}


def test_the_event_modules_import_without_torch_or_pot() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'ot'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import dpledger.core, dpledger.core.events as ev, dpledger.core.event_trees\n"
        "print(ev.pure_epsilon(ev.PureDPEvent(0.5)))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "0.5"


def test_every_core_class_is_exported() -> None:
    """A new core event class is added to ``__all__`` of :mod:`dpledger.core.events`."""
    classes = {cls.__name__ for cls in events.EVENT_KINDS.core.values()}
    assert classes <= set(events.__all__)


def test_every_integer_field_of_a_core_event_is_read_as_an_integer() -> None:
    """A new core event with an integer parameter has its name in ``INT_EVENT_FIELDS`` (JSON
    Schema counts 10.0 as an integer, and the parser reads it as 10)."""
    integers = {
        field.name
        for cls in events.EVENT_KINDS.core.values()
        for field in attrs.fields(cls)
        if field.type in (int, "int")
    }
    assert integers == set(events.INT_EVENT_FIELDS)

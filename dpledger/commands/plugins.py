"""``dpledger plugins``: list plugins, what they register, their trust tier and their problems.

Exit code 0 when no plugin has a problem, 1 when one has (every plugin is still listed): a
plugin whose check in a subprocess failed (it ended the process, exceeded the time limit or
raised while imported or registered) is listed with its problem, and is never imported here.
``dpledger plugins METHOD`` loads only the distribution that provides ``METHOD``.

A builtin method whose plugin package ``dpledger.plugins.NAME`` has an extra of dpledger
(``dpledger[NAME]``: torch, POT, ...) is listed with that extra and whether its distributions
are installed (found on the import path; nothing is imported).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import inspect
import json
from collections.abc import Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any

import attrs

from dpledger.commands._shared import add_plugin_options, host_from_args

if TYPE_CHECKING:  # the plugin host loads when a command runs
    from dpledger.core.specs import MethodSpec
    from dpledger.runtime.plugin_manager import PluginHost, PluginInfo


__all__ = [
    "describe_method",
    "distribution_installed",
    "extra_distributions",
    "extra_installed",
    "main",
    "method_extra",
    "method_parameters",
    "register",
]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plugins",
        help="list installed plugins, their methods, mechanisms and problems",
        description="List installed plugins, their methods, mechanisms, trust tier and problems.",
    )
    parser.add_argument(
        "method",
        nargs="?",
        metavar="METHOD",
        default=None,
        help="show this method's parameters (types, defaults) and proof "
        "(default: list every plugin)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_plugin_options(parser)
    parser.set_defaults(func=main)


def method_parameters(spec: MethodSpec) -> list[dict[str, Any]]:
    """Name, type, default (None when required) and whether required, of each parameter."""
    out = []
    for field in attrs.fields(spec.params):
        if not field.init:
            continue
        required = field.default is attrs.NOTHING
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        out.append(
            {
                "name": field.alias or field.name,
                "type": field.type
                if isinstance(field.type, str)
                else getattr(field.type, "__name__", str(field.type)),
                "required": required,
                "default": None if required else default,
            }
        )
    return out


def _normal(dist: str) -> str:
    from dpledger.cleanroom.tree import normal_name

    return normal_name(dist)


def extra_distributions(extra: str) -> tuple[str, ...]:
    """The distributions dpledger's extra ``extra`` names (none for an extra it lacks)."""
    from dpledger.cleanroom.tree import extra_distributions as named

    return named(extra)


@functools.cache
def _top_level_names() -> dict[str, tuple[str, ...]]:
    """Installed distributions (normalised names) and their top-level import names."""
    out: dict[str, tuple[str, ...]] = {}
    for top, owners in metadata.packages_distributions().items():
        for owner in owners:
            if top.isidentifier():
                out[_normal(owner)] = (*out.get(_normal(owner), ()), top)
    return out


def distribution_installed(dist: str) -> bool:
    """Whether ``dist`` is installed and each of its top-level names is found on the import
    path (:func:`importlib.util.find_spec`; nothing is imported)."""
    tops = _top_level_names().get(_normal(dist), ())
    try:
        return bool(tops) and all(importlib.util.find_spec(t) is not None for t in tops)
    except (ImportError, ValueError):
        return False


def extra_installed(extra: str) -> bool:
    """Whether every distribution dpledger's extra ``extra`` names is installed."""
    return all(distribution_installed(d) for d in extra_distributions(extra))


def method_extra(spec: MethodSpec) -> str | None:
    """The extra of dpledger a builtin method needs: a method of the plugin package
    ``dpledger.plugins.NAME`` needs ``dpledger[NAME]`` where dpledger has that extra (as the
    clean room's path for ``dpledger run`` holds it); ``None`` for any other method."""
    from dpledger.runtime.plugin_manager import BUILTIN_DISTRIBUTION

    if spec.provenance is None or spec.provenance.distribution != BUILTIN_DISTRIBUTION:
        return None
    parts = str(getattr(spec.run, "__module__", "") or "").split(".")
    if parts[:2] != ["dpledger", "plugins"] or len(parts) < 3:
        return None
    return parts[2] if extra_distributions(parts[2]) else None


def _needs(specs: list[MethodSpec]) -> dict[str, Any]:
    """``needs`` (the extras the methods need, comma-separated, or ``None``) and
    ``installed`` (whether all of them are)."""
    extras = sorted({e for e in map(method_extra, specs) if e is not None})
    return {
        "needs": ",".join(extras) if extras else None,
        "installed": all(extra_installed(e) for e in extras),
    }


def describe_method(spec: MethodSpec) -> dict[str, Any]:
    """What ``dpledger plugins METHOD`` shows, as data."""
    prov = spec.provenance
    return {
        "name": spec.name,
        "description": spec.description,
        "plugin": prov.plugin if prov else None,
        "distribution": prov.distribution if prov else None,
        "tier": prov.tier if prov else "unverified",
        "proof": spec.proof.to_dict(),
        "parameters": method_parameters(spec),
        "doc": inspect.getdoc(spec.params) or "",
        **_needs([spec]),
    }


def _show_method(host: PluginHost, name: str, as_json: bool) -> int:
    info = describe_method(host.method(name))
    if as_json:
        print(json.dumps(info, indent=2, sort_keys=True, default=repr))
        return 0
    print(f"{info['name']}: {info['description']}")
    print(
        f"plugin {info['plugin'] or '-'} ({info['distribution'] or 'no distribution'}), "
        f"trust tier {info['tier']}"
    )
    print(f"proof: {info['proof']['citation']}")
    if info["needs"] is not None:
        print(f"needs: {_needs_cell(info)}{_install_hint(info)}")
    header = ("PARAMETER", "TYPE", "DEFAULT")
    rows = [
        (p["name"], str(p["type"]), "(required)" if p["required"] else repr(p["default"]))
        for p in info["parameters"]
    ]
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(3)]
    print()
    for row in [header, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if info["doc"]:
        print(f"\n{info['doc']}")
    return 0


def _cell(values: tuple[str, ...]) -> str:
    return ", ".join(values) if values else "-"


def _needs_cell(needs: Mapping[str, Any]) -> str:
    if needs["needs"] is None:
        return "-"
    return f"dpledger[{needs['needs']}] ({'installed' if needs['installed'] else 'not installed'})"


def _install_hint(needs: Mapping[str, Any]) -> str:
    if needs["needs"] is None or needs["installed"]:
        return ""
    return f"; install it: pip install 'dpledger[{needs['needs']}]'"


def _plugin_needs(host: PluginHost, infos: list[PluginInfo]) -> list[dict[str, Any]]:
    """What each plugin's methods need (:func:`_needs`), in the order of ``infos``."""
    methods = host.methods()
    return [_needs([methods[m] for m in i.methods if m in methods]) for i in infos]


def main(args: argparse.Namespace) -> int:
    if args.method is not None:
        return _show_method(host_from_args(args, on_demand=True), args.method, args.json)
    host = host_from_args(args)
    infos = host.plugins()
    problems = host.problems()
    needs = _plugin_needs(host, infos)
    if args.json:
        payload = {
            "plugins": [info.to_dict() | n for info, n in zip(infos, needs, strict=True)],
            "problems": [p.to_dict() for p in problems],
            "skipped": [{"plugin": n, "reason": r} for n, r in host.pm.skipped],
        }
        print(json.dumps(payload, indent=2, sort_keys=True))
        return 1 if problems else 0
    _print_table(infos, needs)
    missing = sorted({n["needs"] for n in needs if n["needs"] is not None and not n["installed"]})
    if missing:
        extras = ",".join(missing)
        print(
            f"\nmethods marked 'not installed' need an extra of dpledger that is not installed: "
            f"pip install 'dpledger[{extras}]'"
        )
    if problems:
        print(f"\n{len(problems)} problem(s); the plugins above without one keep working:")
        for p in problems:
            print(f"  {p.describe()}")
    for name, reason in host.pm.skipped:
        print(f"skipped {name}: {reason}")
    return 1 if problems else 0


def _print_table(infos: list[PluginInfo], needs: list[dict[str, Any]]) -> None:
    header = ("PLUGIN", "DISTRIBUTION", "VERSION", "TIER", "METHODS", "MECHANISMS", "NEEDS")
    rows = [
        (
            i.name,
            i.distribution or "-",
            i.version or "-",
            i.tier,
            _cell(i.methods),
            _cell(i.mechanisms),
            _needs_cell(n),
        )
        for i, n in zip(infos, needs, strict=True)
    ]
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        print("(no plugins loaded)")

"""``dpledger plugins``: list plugins, what they register, their trust tier and their problems.

Exit code 0 when no plugin has a problem, 1 when one has (every plugin is still listed): a
plugin whose check in a subprocess failed (it ended the process, exceeded the time limit or
raised while imported or registered) is listed with its problem, and is never imported here.
``dpledger plugins METHOD`` loads only the distribution that provides ``METHOD``.
"""

from __future__ import annotations

import argparse
import inspect
import json
from typing import TYPE_CHECKING, Any

import attrs

from dpledger.commands._shared import add_plugin_options, host_from_args

if TYPE_CHECKING:  # the plugin host loads when a command runs
    from dpledger.core.specs import MethodSpec
    from dpledger.runtime.plugin_manager import PluginHost, PluginInfo


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


def main(args: argparse.Namespace) -> int:
    if args.method is not None:
        return _show_method(host_from_args(args, on_demand=True), args.method, args.json)
    host = host_from_args(args)
    infos = host.plugins()
    problems = host.problems()
    if args.json:
        payload = {
            "plugins": [info.to_dict() for info in infos],
            "problems": [p.to_dict() for p in problems],
            "skipped": [{"plugin": n, "reason": r} for n, r in host.pm.skipped],
        }
        print(json.dumps(payload, indent=2, sort_keys=True))
        return 1 if problems else 0
    _print_table(infos)
    if problems:
        print(f"\n{len(problems)} problem(s); the plugins above without one keep working:")
        for p in problems:
            print(f"  {p.describe()}")
    for name, reason in host.pm.skipped:
        print(f"skipped {name}: {reason}")
    return 1 if problems else 0


def _print_table(infos: list[PluginInfo]) -> None:
    header = ("PLUGIN", "DISTRIBUTION", "VERSION", "TIER", "METHODS", "MECHANISMS")
    rows = [
        (
            i.name,
            i.distribution or "-",
            i.version or "-",
            i.tier,
            _cell(i.methods),
            _cell(i.mechanisms),
        )
        for i in infos
    ]
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        print("(no plugins loaded)")

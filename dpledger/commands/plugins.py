"""``dpledger plugins``: list plugins, what they register, their trust tier and their problems."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the plugin host loads when a command runs
    from dpledger.core.plugin_manager import PluginHost


def add_plugin_options(parser: argparse.ArgumentParser) -> None:
    """The plugin-loading flags shared by every command that loads plugins."""
    group = parser.add_argument_group("plugin loading")
    group.add_argument("--plugins-allow", metavar="NAMES", default=None,
                       help="load only these plugins or distributions (comma-separated; "
                            "default: $DPLEDGER_PLUGINS_ALLOW, else all)")
    group.add_argument("--plugins-block", metavar="NAMES", default=None,
                       help="never load these plugins or distributions (comma-separated; "
                            "default: $DPLEDGER_PLUGINS_BLOCK)")
    group.add_argument("--plugins-trace", action="store_true",
                       help="trace plugin loading and hook calls to stderr "
                            "(also: DPLEDGER_PLUGINS_TRACE=1)")


def host_from_args(args: argparse.Namespace, *, on_demand: bool = False) -> PluginHost:
    """The host the plugin-loading flags ask for; ``on_demand`` loads third-party plugins only
    when a method or mechanism that no builtin plugin provides is needed."""
    from dpledger.core.plugin_manager import host_from_options

    return host_from_options(allow=args.plugins_allow, block=args.plugins_block,
                             trace=bool(args.plugins_trace), on_demand=on_demand)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plugins", help="list installed plugins, their methods, mechanisms and problems",
        description="List installed plugins, their methods, mechanisms, trust tier and problems.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_plugin_options(parser)
    parser.set_defaults(func=main)


def _cell(values: tuple[str, ...]) -> str:
    return ", ".join(values) if values else "-"


def main(args: argparse.Namespace) -> int:
    host = host_from_args(args)
    infos = host.plugins()
    if args.json:
        payload = {
            "plugins": [info.to_dict() for info in infos],
            "problems": [p.to_dict() for p in host.problems()],
            "skipped": [{"plugin": n, "reason": r} for n, r in host.pm.skipped],
        }
        print(json.dumps(payload, indent=2, sort_keys=True))
        return 0
    header = ("PLUGIN", "DISTRIBUTION", "VERSION", "TIER", "METHODS", "MECHANISMS")
    rows = [
        (i.name, i.distribution or "-", i.version or "-", i.tier, _cell(i.methods),
         _cell(i.mechanisms))
        for i in infos
    ]
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        print("(no plugins loaded)")
    problems = host.problems()
    if problems:
        print(f"\n{len(problems)} problem(s); the plugins above keep working:")
        for p in problems:
            print(f"  {p.describe()}")
    for name, reason in host.pm.skipped:
        print(f"skipped {name}: {reason}")
    return 0

"""How the clean room finds the event of a release that names a method.

A builtin method is declared here, by dpledger's own code, in the clean room. Any other method
is a third-party plugin's: its declaration arrives as data from a worker process
(:mod:`dpledger.cleanroom.worker`); until it has arrived, the release gets a placeholder and
the request is recorded, so that one pass over the file collects every request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpledger.cleanroom.declarations import DeclarationReply, DeclarationRequest, costs_nothing
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import Event, NoOpEvent

if TYPE_CHECKING:
    from dpledger.runtime.plugin_manager import PluginHost


def builtin_host(allow: Sequence[str] | None, block: Sequence[str] | None) -> PluginHost:
    """dpledger's own plugins, loaded from the fixed builtin list (no installed metadata)."""
    from dpledger.runtime.plugin_manager import PluginHost, make_plugin_manager

    return PluginHost(make_plugin_manager(allow=allow, block=block, builtin_only=True))


def names(raw: str | None) -> list[str] | None:
    """A comma-separated ``--plugins-allow``/``--plugins-block`` value."""
    if raw is None:
        return None
    return [n.strip() for n in raw.split(",") if n.strip()]


class RoomResolver:
    """Resolves method releases in the clean room (see the module docstring)."""

    def __init__(self, host: PluginHost, replies: Iterable[DeclarationReply]) -> None:
        self.host = host
        self.replies = {r.request.key(): r for r in replies}
        #: requests still to be answered by a worker
        self.needs: list[dict[str, Any]] = []
        #: one line per third-party declaration a bound rests on
        self.rests_on: list[str] = []
        #: the third-party methods declared (whose plugins may draw report sections)
        self.third_party_methods: set[str] = set()

    def __call__(
        self, name: str, values: Mapping[str, Any], adjacency: Adjacency
    ) -> tuple[Event, str | None, str]:
        if name in self.host.methods():
            return self.host.resolve_method(name, values, adjacency)
        request = DeclarationRequest.of(name, values, adjacency)
        reply = self.replies.get(request.key())
        if reply is None:
            if request.to_dict() not in self.needs:
                self.needs.append(request.to_dict())
            return NoOpEvent(), None, "row"
        if reply.error is not None:
            raise InvalidParameterError(
                str(reply.error.get("field", "method")),
                str(reply.error.get("problem", "was refused by its plugin")),
                str(reply.error.get("fix", "see `dpledger plugins`")),
            )
        event = reply.core_event()
        self.third_party_methods.add(name)
        if costs_nothing(event):
            line = (
                f"method {name!r}, post-processing by the word of third-party plugin "
                f"{reply.who()}: no privacy cost is charged for it"
            )
        else:
            line = (
                f"method {name!r} as declared by third-party plugin {reply.who()}: dpledger "
                "certifies the declared events, not that the plugin's code does what it declares"
            )
        if line not in self.rests_on:
            self.rests_on.append(line)
        return event, f"{reply.plugin or 'unknown'} (third-party)", reply.unit

"""``dpledger account`` inside the clean room: read the file, declare, account, print."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Mapping
from typing import Any

from dpledger.cleanroom.declarations import reply_from_dict
from dpledger.cleanroom.resolver import RoomResolver, builtin_host, names
from dpledger.cleanroom.room import write_needs


def resolver_for(request: Mapping[str, Any]) -> RoomResolver:
    """The clean room's method resolver for one request (its answered declarations)."""
    options = request["options"]
    host = builtin_host(names(options.get("plugins_allow")), names(options.get("plugins_block")))
    replies = [reply_from_dict(d) for d in request.get("declarations", [])]
    return RoomResolver(host, replies)


def serve(request: Mapping[str, Any]) -> int:
    """Certify the pipeline file of ``request`` and print it as ``dpledger account`` does."""
    from dpledger.commands.account import _load, certify

    options = {k: v for k, v in request["options"].items() if k != "result_file"}
    args = argparse.Namespace(**options)
    resolver = resolver_for(request)
    pipeline = _load(args.file, resolver)
    if resolver.needs:
        return write_needs(request, resolver.needs)
    result_file = request["options"].get("result_file")
    if result_file is None:
        return certify(args, pipeline, resolver.rests_on, resolver.host)
    with open(result_file, "w", encoding="utf-8") as out, contextlib.redirect_stdout(out):
        return certify(args, pipeline, resolver.rests_on, resolver.host)

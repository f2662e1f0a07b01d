"""The vocabulary of a composition graph: node kinds, transform kinds, declared units, and the
error that names a node. Shared by the graph model, its validation and its reduction."""

from __future__ import annotations

from dpledger.core.errors import GraphError

NODE_KINDS: tuple[str, ...] = ("source", "transform", "release", "postprocess")
TRANSFORM_KINDS: tuple[str, ...] = ("partition", "cell", "contribution_bound")
DATA_KINDS: tuple[str, ...] = ("source", "transform")
DECLARED_UNITS: tuple[str, ...] = ("row", "user")


class NodeError(GraphError):
    """A :class:`GraphError` about one node (its id is in ``node``)."""

    def __init__(self, node: str, problem: str, fix: str) -> None:
        self.node = node
        super().__init__(f"node {node!r}: {problem}. Fix: {fix}")

"""Adjacency (the neighbouring relation and the privacy unit) as explicit data."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from dpledger.core.errors import InvalidParameterError
from dpledger.core.validation import positive_int

Relation = Literal["add_remove", "replace_one"]
Unit = Literal["row", "user"]
RELATIONS: tuple[str, ...] = ("add_remove", "replace_one")
UNITS: tuple[str, ...] = ("row", "user")
CONTRIBUTION_KINDS: tuple[str, ...] = ("rows", "time_points")


def _relation_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in RELATIONS:
        raise InvalidParameterError(
            attribute.name, f"unknown adjacency {value!r}", f"use one of {list(RELATIONS)}"
        )


def _unit_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in UNITS:
        raise InvalidParameterError(
            attribute.name, f"unknown privacy unit {value!r}", f"use one of {list(UNITS)}"
        )


def _contribution_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in CONTRIBUTION_KINDS:
        raise InvalidParameterError(
            attribute.name,
            f"unknown contribution kind {value!r}",
            f"use {list(CONTRIBUTION_KINDS)}",
        )


@attrs.frozen
class Adjacency:
    """Who is protected and what a neighbouring dataset is.

    ``relation`` is add/remove (one unit present or absent) or replace-one (one unit's data
    substituted). ``unit`` is ``"row"`` (event level) or ``"user"``; a user contributes at most
    ``max_contributions`` rows (or time points) and is identified by ``unit_key``.
    """

    relation: str = attrs.field(default="add_remove", validator=_relation_validator)
    unit: str = attrs.field(default="row", validator=_unit_validator)
    max_contributions: int = attrs.field(default=1, validator=positive_int)
    unit_key: str | None = None
    contribution: str = attrs.field(default="rows", validator=_contribution_validator)

    def __attrs_post_init__(self) -> None:
        if self.unit == "row" and self.max_contributions != 1:
            raise InvalidParameterError(
                "max_contributions",
                "row-level adjacency has exactly one row per unit",
                "use unit = 'user' with a unit_key to bound contributions per user",
            )
        if self.unit == "user" and not self.unit_key:
            raise InvalidParameterError(
                "unit_key",
                "user-level adjacency needs the column that identifies a user",
                "set unit_key, e.g. 'user_id'",
            )

    @property
    def sensitivity_factor(self) -> float:
        """Factor on a per-unit add/remove contribution bound (2 for replace-one)."""
        return 2.0 if self.relation == "replace_one" else 1.0

    @property
    def row_level(self) -> Adjacency:
        """The row-level relation of the same kind."""
        return Adjacency(relation=self.relation, unit="row")

    def describe(self) -> str:
        rel = "add/remove" if self.relation == "add_remove" else "replace-one"
        if self.unit == "row":
            return f"{rel} of one row (event level)"
        return (
            f"{rel} of one user (key {self.unit_key!r}, at most {self.max_contributions} "
            f"{self.contribution.replace('_', ' ')} per user)"
        )

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


ROW_ADD_REMOVE = Adjacency()
ROW_REPLACE_ONE = Adjacency(relation="replace_one")

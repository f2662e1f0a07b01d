"""Serialization Ψ of a user table to text, and a robust parser back (paper C, Section 5).

Format (one line per row, the header names the columns in schema order)::

    Columns: subject_id, heartrate, state
    [Row 1]: subject_id is 7, heartrate is 83.0, state is low
    [Row 2]: subject_id is 7, heartrate is 85.5, state is high

Numbers are written with ``repr`` (shortest exact round trip) or with ``precision`` decimals.
String values may not contain a line break or ``", "`` (the separators); such values are refused.

Parsing a row tries, in order: (1) key-value pairs ``col is value`` (any order, each column once),
(2) comma-separated values in schema order (static columns may be left out), then (3) infills
static columns from the table's history (a static value is constant within a table: the first
valid row fixes it, later rows inherit it). A row is invalid when a numeric value is not a finite
number or a categorical value is not one of the public categories; :func:`parse_table` stops at
the first invalid row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import attrs

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.path.schema import TableSchema, iso_text, seconds_from

HEADER_PREFIX = "Columns: "
_ROW = re.compile(r"^\s*\[\s*Row\s*(\d+)\s*\]\s*:\s?(.*)$")
_SEPARATORS = ("\n", "\r", ", ")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")  # not a time in the text form


def _check_precision(precision: int | None) -> None:
    if precision is not None and (
        isinstance(precision, bool) or not isinstance(precision, int) or not 0 <= precision <= 17
    ):
        raise InvalidParameterError(
            "precision",
            f"must be None or in [0, 17], got {precision!r}",
            "pass None (exact) or e.g. 2",
        )


def format_value(schema: TableSchema, j: int, value: Any, precision: int | None = None) -> str:
    """The text of ``value`` in column ``j``."""
    col = schema.columns[j]
    if col.kind == "datetime":
        seconds = seconds_from(value)
        if seconds is None:
            raise InvalidParameterError(
                f"column {col.name!r}",
                f"value {value!r} is not a time",
                "clean the data (UserTables refuses these)",
            )
        return iso_text(seconds)
    if col.kind == "numeric":
        v = float(value)
        if not math.isfinite(v):
            raise InvalidParameterError(
                f"column {col.name!r}",
                f"value {value!r} is not finite",
                "clean the data (UserTables refuses these)",
            )
        if precision is None:
            return repr(v)
        text = f"{v:.{precision}f}"
        return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text
    text = str(value)
    if any(s in text for s in _SEPARATORS) or text != text.strip() or not text:
        raise InvalidParameterError(
            f"column {col.name!r}",
            f"value {text!r} is empty, padded or contains a separator (line break or ', ')",
            "rename the value (e.g. replace ', ' by '; ')",
        )
    return text


def header(schema: TableSchema) -> str:
    """``Columns: a, b, c`` (no trailing newline)."""
    return HEADER_PREFIX + ", ".join(schema.names)


def serialize_row(
    schema: TableSchema, row: Sequence[Any], index: int, precision: int | None = None
) -> str:
    """``[Row index]: a is 1.0, b is x`` (no trailing newline; ``index`` counts from 1)."""
    if len(row) != len(schema.columns):
        raise InvalidParameterError(
            "row",
            f"has {len(row)} values but the schema has {len(schema.columns)} columns",
            "give one value per schema column",
        )
    body = ", ".join(
        f"{c.name} is {format_value(schema, j, v, precision)}"
        for j, (c, v) in enumerate(zip(schema.columns, row, strict=True))
    )
    return f"[Row {index}]: {body}"


def serialize_rows(
    schema: TableSchema, rows: Sequence[Sequence[Any]], start: int = 1, precision: int | None = None
) -> str:
    """Rows ``start, start+1, ...``, each line ending with a newline."""
    return "".join(
        serialize_row(schema, row, start + i, precision) + "\n" for i, row in enumerate(rows)
    )


def serialize_table(
    schema: TableSchema, rows: Sequence[Sequence[Any]], precision: int | None = None
) -> str:
    """Ψ(table): the header line, then every row (newline-terminated)."""
    _check_precision(precision)
    return header(schema) + "\n" + serialize_rows(schema, rows, 1, precision)


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------
def _convert(schema: TableSchema, j: int, text: str) -> Any:
    """The typed value of ``text`` in column ``j``, or None if it is invalid there."""
    col = schema.columns[j]
    text = text.strip()
    if col.kind == "datetime":
        return seconds_from(text) if text and not _NUMBER.match(text) else None
    if col.kind == "numeric":
        try:
            v = float(text)
        except ValueError:
            return None
        return v if math.isfinite(v) else None
    if col.kind == "categorical":
        return text if text in col.categories else None
    return text or None


def _key_value(schema: TableSchema, body: str) -> dict[int, str] | None:
    names = sorted(schema.names, key=len, reverse=True)
    pattern = re.compile(r"(?:^|,\s*)(" + "|".join(re.escape(n) for n in names) + r")\s+is\s+")
    matches = list(pattern.finditer(body))
    if not matches or matches[0].start() != 0:
        return None
    out: dict[int, str] = {}
    for m, nxt in zip(matches, [*matches[1:], None], strict=True):
        j = schema.names.index(m.group(1))
        if j in out:
            return None
        out[j] = body[m.end() : nxt.start() if nxt is not None else len(body)]
    return out


def _csv(schema: TableSchema, body: str) -> dict[int, str] | None:
    parts = [p.strip() for p in body.split(",")]
    d = len(schema.columns)
    if len(parts) == d:
        return dict(enumerate(parts))
    dynamic = [j for j, c in enumerate(schema.columns) if c.kind != "static"]
    if len(parts) == len(dynamic):
        return dict(zip(dynamic, parts, strict=True))
    return None


def _typed(
    schema: TableSchema, fields: dict[int, str], static: dict[int, str], fallback: str | None
) -> tuple[Any, ...] | None:
    values: list[Any] = []
    for j, col in enumerate(schema.columns):
        if col.kind == "static" and j in static:
            values.append(static[j])  # propagated from the table's history
            continue
        if j not in fields:
            if col.kind == "static" and fallback is not None:
                values.append(fallback)
                continue
            return None
        v = _convert(schema, j, fields[j])
        if v is None:
            return None
        values.append(v)
    return tuple(values)


def parse_row(
    schema: TableSchema,
    line: str,
    static: dict[int, str] | None = None,
    fallback: str | None = None,
) -> tuple[Any, ...] | None:
    """One typed row from one line (``[Row i]:`` prefix optional), or None if invalid.

    ``static`` maps static column positions to the values fixed by the table's history (they
    override what the line says); ``fallback`` fills a static column the line leaves out.
    """
    static = static or {}
    m = _ROW.match(line)
    body = (m.group(2) if m else line).strip()
    if not body:
        return None
    for fields in (_key_value(schema, body), _csv(schema, body)):
        if fields is not None:
            row = _typed(schema, fields, static, fallback)
            if row is not None:
                return row
    return None


@attrs.define
class RowParser:
    """Incremental parser of one generated table: feed lines, it stops at the first bad row.

    ``fallback`` fills a static column that a row leaves out before the history fixes it.
    """

    schema: TableSchema
    fallback: str | None = None
    rows: list[tuple[Any, ...]] = attrs.field(factory=list)
    static: dict[int, str] = attrs.field(factory=dict)
    stopped: bool = False

    def feed(self, line: str) -> bool:
        """Parse one line; returns False (and stops) at an invalid row. Blank lines are skipped."""
        if self.stopped:
            return False
        if not line.strip() or line.lstrip().startswith(HEADER_PREFIX.strip()):
            return True
        row = parse_row(self.schema, line, self.static, self.fallback)
        if row is None:
            self.stopped = True
            return False
        if not self.rows:
            self.static = {
                j: row[j] for j, c in enumerate(self.schema.columns) if c.kind == "static"
            }
        self.rows.append(row)
        return True


def parse_table(
    schema: TableSchema, text: str, fallback: str | None = None
) -> list[tuple[Any, ...]]:
    """Ψ⁻¹: the valid rows of ``text`` up to (not including) the first invalid row."""
    parser = RowParser(schema, fallback)
    for line in text.split("\n"):
        if not parser.feed(line):
            break
    return parser.rows

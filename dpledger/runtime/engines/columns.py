"""Columns as every engine reads them: canonical keys, stable hashes and checked values.

A key column (partition key or unit id) holds integers or text. Its canonical form is the same
whichever engine read it (an integer column read as floats by one reader and as integers by
another is the same column), and each distinct key gets a 64-bit hash that depends on the key
only: on the engine, the chunk and the row order it does not. A value column holds finite
numbers; text, NaN and infinities are refused naming the column.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.errors import InvalidParameterError

__all__ = [
    "KeyColumn",
    "UnitIds",
    "canonical_name",
    "key_column",
    "parse_name",
    "splitmix64",
    "unit_column",
    "unit_hashes",
    "value_column",
]

U64 = NDArray[np.uint64]
#: separate the hashes of integer keys from those of text keys
INT_TAG = np.uint64(0x5BD1E9955BD1E995)
#: integer unit ids spanning fewer values than this are coded by their offset (no sort)
OFFSET_SPAN = 2**31


def splitmix64(x: U64) -> U64:
    """The splitmix64 finaliser, element-wise (wrapping uint64 arithmetic)."""
    z: U64 = np.add(x, np.uint64(0x9E3779B97F4A7C15), dtype=np.uint64)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def _text_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class KeyColumn:
    """A key column: per row the code of its key, per distinct key its value and hash."""

    def __init__(self, codes: NDArray[np.int64], uniques: list[Any], hashes: U64) -> None:
        self.codes = codes
        self.uniques = uniques
        self.hashes = hashes

    def names(self) -> list[str]:
        """The canonical names of the distinct keys (``i:12``, ``s:text``)."""
        return [canonical_name(k) for k in self.uniques]

    @property
    def code_bits(self) -> int:
        """Bits that hold every code (at least 1)."""
        return max(self.hashes.size - 1, 1).bit_length()

    def row_hashes(self) -> U64:
        """Per row: the hash of its key."""
        out: U64 = self.hashes[self.codes]
        return out

    def take(self, rows: NDArray[np.int64]) -> KeyColumn:
        """The column of the rows ``rows`` (the same keys, codes and hashes)."""
        return KeyColumn(self.codes[rows], self.uniques, self.hashes)


class UnitIds:
    """A unit column of integer ids coded by their offset from the smallest (no sort): per row
    its code and the hash of its id, which :func:`key_column` gives the same id. Codes only
    group rows by unit; which number a unit gets changes no bounding decision."""

    def __init__(self, codes: NDArray[np.int64], bits: int, hashes: U64) -> None:
        self.codes = codes
        self.code_bits = bits
        self._hashes = hashes

    def row_hashes(self) -> U64:
        return self._hashes

    def take(self, rows: NDArray[np.int64]) -> UnitIds:
        return UnitIds(self.codes[rows], self.code_bits, self._hashes[rows])


def _int_hashes(ints: NDArray[np.int64]) -> U64:
    return splitmix64(ints.view(np.uint64) ^ INT_TAG)


def canonical_name(key: Any) -> str:
    """``i:<integer>`` or ``s:<text>``: a key as it travels between engine and driver."""
    if isinstance(key, bool | int | np.integer):
        return f"i:{int(key)}"
    return f"s:{key}"


def parse_name(name: str) -> int | str:
    """The key a canonical name stands for."""
    return int(name[2:]) if name.startswith("i:") else name[2:]


def _is_null(x: Any) -> bool:
    if x is None:
        return True
    try:
        return bool(x != x)  # NaN, and missing values that are not equal to themselves
    except (TypeError, ValueError):
        return True  # a missing value whose truth is undefined (pandas.NA)


def _null_error(column: str) -> InvalidParameterError:
    return InvalidParameterError(
        column, "holds missing values (null keys)", "drop or fill the rows without a key first"
    )


def _integers(arr: NDArray[Any], column: str) -> NDArray[np.int64] | None:
    """The column as integers, if it holds integers only (None: it holds text)."""
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise _null_error(column)
        if np.any(arr != np.floor(arr)):
            raise InvalidParameterError(
                column, "holds fractional numbers", "use integer or text keys"
            )
        return arr.astype(np.int64)
    items = arr.tolist()
    if any(_is_null(x) for x in items):
        raise _null_error(column)
    if all(isinstance(x, int | np.integer) for x in items):
        return np.asarray(items, dtype=np.int64)
    return None


def _sorted_codes(ints: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The distinct integers, sorted, and each row's index among them (by one sort, or by a
    table of the range when it is at most a few times the number of rows)."""
    if ints.size and int(ints.max()) - int(ints.min()) < 4 * ints.size + 65536:
        offset = ints - ints.min()
        present = np.zeros(int(offset.max()) + 1, dtype=bool)
        present[offset] = True
        rank = np.cumsum(present, dtype=np.int64) - 1
        return np.flatnonzero(present).astype(np.int64) + ints.min(), rank[offset]
    order = np.argsort(ints, kind="stable")
    ranked = ints[order]
    new = np.ones(ranked.size, dtype=bool)
    new[1:] = ranked[1:] != ranked[:-1]
    codes = np.empty(ints.size, dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    return ranked[new], codes


def key_column(values: Any, column: str) -> KeyColumn:
    """The key column ``values`` (integers or text) in canonical form."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InvalidParameterError(column, f"must be 1-D, got shape {arr.shape}", "one key a row")
    ints = _integers(arr, column) if arr.size else np.zeros(0, dtype=np.int64)
    if ints is not None:
        uniq, codes = _sorted_codes(ints)
        return KeyColumn(codes, uniq.tolist(), _int_hashes(uniq))
    texts = np.asarray([str(x) for x in arr.tolist()], dtype=object)
    uniq_t, codes = np.unique(texts, return_inverse=True)
    keys = [str(k) for k in uniq_t]
    hashes = np.asarray([_text_hash(k) for k in keys], dtype=np.uint64)
    return KeyColumn(codes.astype(np.int64).reshape(-1), keys, hashes)


def unit_hashes(values: Any, column: str) -> U64:
    """Per row: the hash of its unit id (the row hashes of :func:`unit_column`, without its
    codes)."""
    arr = np.asarray(values)
    ints = _integers(arr, column) if arr.ndim == 1 and arr.size else None
    return key_column(values, column).row_hashes() if ints is None else _int_hashes(ints)


def unit_column(values: Any, column: str) -> KeyColumn | UnitIds:
    """A unit column: integer ids spanning fewer than :data:`OFFSET_SPAN` values coded by
    their offset (:class:`UnitIds`), any other column by :func:`key_column`; the row hashes
    are the same either way."""
    arr = np.asarray(values)
    ints = _integers(arr, column) if arr.ndim == 1 and arr.size else None
    if ints is None:
        return key_column(values, column)
    low, span = int(ints.min()), int(ints.max()) - int(ints.min())
    if span >= OFFSET_SPAN:
        return key_column(ints, column)
    return UnitIds(ints - low, max(span, 1).bit_length(), _int_hashes(ints))


def value_column(values: Any, column: str) -> NDArray[np.float64]:
    """The value column as finite floats (text, NaN and infinities refused)."""
    arr = np.asarray(values)
    try:
        out = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            column, "holds text, not numbers", "convert the column to numbers first"
        ) from None
    if arr.dtype.kind in "OSUT" and any(isinstance(x, str) for x in arr.tolist()):
        raise InvalidParameterError(
            column, "holds text, not numbers", "convert the column to numbers first"
        )
    if not np.all(np.isfinite(out)):
        raise InvalidParameterError(
            column,
            "holds NaN or infinite values",
            "drop or fill them first (clipping cannot bound a missing value)",
        )
    return out

"""Shared attrs validators of the kernel."""

from __future__ import annotations


def test_one_of_accepts_only_the_choices() -> None:
    import attrs
    import pytest

    from dpledger.core.errors import InvalidParameterError
    from dpledger.core.validation import one_of

    @attrs.frozen
    class P:
        mode: str = attrs.field(default="a", validator=one_of("a", "b"))

    assert P("b").mode == "b"
    for bad in ("c", True, 1, None):
        with pytest.raises(InvalidParameterError, match=r"mode: unknown value .*use one of"):
            P(bad)  # type: ignore[arg-type]

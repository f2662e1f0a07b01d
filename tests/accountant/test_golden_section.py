"""The golden-section search finds an interior maximum and keeps both last points."""

from __future__ import annotations

import math

from dpledger.accountant.golden_section import golden_section


def test_finds_the_maximum_of_a_concave_function() -> None:
    (fa, a), (fb, b) = golden_section(lambda x: -((x - 0.3) ** 2), 0.0, 1.0, 40)
    assert abs(a - 0.3) < 1e-8 and abs(b - 0.3) < 1e-8
    assert fa == -((a - 0.3) ** 2) and fb == -((b - 0.3) ** 2)


def test_each_step_keeps_the_golden_fraction_of_the_interval() -> None:
    (_, a), (_, b) = golden_section(lambda x: x, 0.0, 1.0, 10)
    ratio = (math.sqrt(5.0) - 1) / 2
    assert 1.0 - max(a, b) < ratio**10

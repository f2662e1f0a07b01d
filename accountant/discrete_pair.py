"""A finite pair of laws (P, Q) known by bounds on its masses: the form in which attack
constructions (max of batch sums, likelihood ratios) hand their pairs to the lower bounds."""

from __future__ import annotations

import attrs
import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


@attrs.frozen
class DiscretePair:
    """A finite pair (P, Q) by bounds on its masses: ``p_lower <= P <= p_upper`` per outcome."""

    p_lower: Array
    p_upper: Array
    q_lower: Array
    q_upper: Array

    def swapped(self) -> DiscretePair:
        return DiscretePair(self.q_lower, self.q_upper, self.p_lower, self.p_upper)

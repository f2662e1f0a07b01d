"""The input check of the private data (the latent pipeline's training: experiments/swflow)."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.swflow.data import check_records


def test_check_records_rejects_bad_input() -> None:
    for bad, problem in [
        (np.zeros((0, 2)), "empty"),
        (np.zeros(3), "2-D"),
        (np.array([[np.inf, 1.0]]), "NaN"),
    ]:
        with pytest.raises(InvalidParameterError, match=problem):
            check_records(bad)

"""Log-MGFs of discretised PLDs summed term by term in extended precision (test reference)."""

from __future__ import annotations

import numpy as np

from dpledger.accountant.pld_discrete import DiscretePLD


def reference_log_mgf(pld: DiscretePLD, lam: np.ndarray) -> np.ndarray:
    """log sum p e^{lam l} for every lam, in extended precision (-inf with no finite mass)."""
    pos = pld.masses > 0
    if not pos.any():
        return np.full(lam.shape, -np.inf, dtype=np.longdouble)
    logp = np.log(pld.masses[pos].astype(np.longdouble))
    losses = (pld.offset + np.nonzero(pos)[0]).astype(np.longdouble) * np.longdouble(pld.h)
    out = []
    for value in lam:
        x = logp + np.longdouble(value) * losses
        top = x.max()
        out.append(top + np.log(np.exp(x - top).sum()))
    return np.array(out, dtype=np.longdouble)

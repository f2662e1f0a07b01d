"""The trajectory method's worked example (``MethodSpec.example``; ``dpledger demo`` runs it).

The data is the paper's multimodal set (:func:`~.data.make_multimodal`: three branches, made up
here from a seed, nothing downloaded). Its public facts are the domain (``radius``, ``center``)
and the marginal sizes. The private diagnostics compare a run's outputs with the data and the
ground-truth paths it was made from: W2 of the warm start and of the final particles to the
true marginals, and a figure of the raw data beside the synthetic paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpledger.plugin import Example, InvalidParameterError
from dpledger.plugins.trajectories.data import TrajectoryData, make_multimodal

#: the options of :func:`make_example` and their defaults
OPTIONS: dict[str, int] = {"N": 400, "T": 6, "seed": 0}
#: the figure that shows the raw (private) data beside the synthetic output: never publish
PRIVATE_FIGURE = "PRIVATE-trajectories.png"


def make_example(options: Mapping[str, Any]) -> Example:
    """``T`` marginals of ``N`` points each from the multimodal generator seeded by ``seed``."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidParameterError(
            f"example.{unknown[0]}", "is not an option of this example", f"use {sorted(OPTIONS)}"
        )
    values = {**OPTIONS, **options}
    data = make_multimodal(N=values["N"], T=values["T"], seed=values["seed"])
    return Example(
        data={"marginals": data.marginals, "times": data.times},
        params={
            "n_per_time": [values["N"]] * values["T"],
            "radius": data.radius,
            "center": [float(c) for c in data.center],
        },
        diagnose=lambda outputs, out: diagnose(data, outputs, out),
    )


def diagnose(data: TrajectoryData, outputs: Mapping[str, Any], out: Path) -> dict[str, float]:
    """W2 to the true marginals of the warm start and of the final particles (means over the
    times), and :data:`PRIVATE_FIGURE` in ``out`` (the run's private directory, beside the one
    it publishes) when the run sampled ``paths``."""
    from dpledger.plugins.trajectories.metrics import figure1, marginal_w2

    init = list(outputs["init_particles"])
    w2_init = float(marginal_w2(data.marginals, init).mean())
    w2_final = float(marginal_w2(data.marginals, list(outputs["particles"])).mean())
    if "paths" in outputs:
        import matplotlib.pyplot as plt

        figure1(
            data.paths,
            data.marginals,
            init,
            np.asarray(outputs["paths"]),
            path=out / PRIVATE_FIGURE,
            title="PRIVATE: the raw data (left panels) beside the synthetic output; do not publish",
        )
        plt.close("all")
    return {"w2_warm_start": w2_init, "w2_final": w2_final}

"""One-run white-box audits of Opacus training runs: gradient canaries in Opacus's own clipping
and noise; the digits example's run (slow tier) with a planted half-noise bug caught in one run;
an unsupported optimizer, a loader without Poisson sampling and a model without per-sample
gradients refused in one line."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from dpledger.audit import canaries
from dpledger.audit.opacus_canaries import OpacusCanaries
from dpledger.core.errors import InvalidParameterError

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _private(x: Any, y: Any, *, poisson: bool = True, batch: int = 64) -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=batch, shuffle=True
    )
    model = torch.nn.Linear(x.shape[1], 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return opacus.PrivacyEngine().make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=1.0,
            max_grad_norm=1.0,
            poisson_sampling=poisson,
        )


def _train(model: Any, optimizer: Any, loader: Any, epochs: int) -> None:
    loss = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss(model(xb), yb).backward()
            optimizer.step()


def _random(n: int) -> tuple[Any, Any]:
    gen = torch.Generator().manual_seed(1)
    return torch.rand((n, 8), generator=gen), torch.randint(0, 10, (n,), generator=gen)


def test_canaries_go_through_opacus_clipping_and_noise() -> None:
    model, optimizer, loader = _private(*_random(200), batch=50)
    audit = OpacusCanaries.attach(optimizer, loader, canaries=200, seed=0)
    _train(model, optimizer, loader, 1)
    assert len(audit.steps) == len(loader) == 4
    for step in audit.steps:
        assert step.rate == pytest.approx(0.25) and step.scale == 1.0 and step.sensitivity == 1.0
    # the excluded canaries' coordinates are Opacus's noise alone: N(0, 1) per step
    out = np.concatenate([s.values[~audit.included] for s in audit.steps])
    assert abs(out.mean()) < 5 / np.sqrt(out.size)
    assert abs(out.std() - 1) < 5 / np.sqrt(2 * out.size)
    # an included canary drawn into a batch adds the clip norm: the coordinates' mean over
    # included canaries and steps is the rate times the clip norm
    inc = np.concatenate([s.values[audit.included] for s in audit.steps])
    assert abs(inc.mean() - 0.25) < 5 / np.sqrt(inc.size)


def test_an_unsupported_optimizer_is_one_line() -> None:
    model = torch.nn.Linear(4, 2)
    with pytest.raises(InvalidParameterError, match="pass the DPOptimizer"):
        OpacusCanaries.attach(torch.optim.SGD(model.parameters(), lr=0.1), None)


def test_a_loader_without_poisson_sampling_is_one_line() -> None:
    _, optimizer, loader = _private(*_random(100), poisson=False)
    with pytest.raises(InvalidParameterError, match="poisson_sampling=True"):
        OpacusCanaries.attach(optimizer, loader, canaries=20)


def test_a_parameter_without_per_sample_gradients_is_one_line() -> None:
    model, optimizer, loader = _private(*_random(100))
    extra = torch.nn.Parameter(torch.zeros(3))
    optimizer.original_optimizer.add_param_group({"params": [extra]})
    OpacusCanaries.attach(optimizer, loader, canaries=20, seed=0)
    with pytest.raises(InvalidParameterError, match="without per-sample gradients"):
        _train(model, optimizer, loader, 1)


def test_too_many_canaries_is_one_line() -> None:
    _, optimizer, loader = _private(*_random(100))
    with pytest.raises(InvalidParameterError, match="pass at most 100"):
        OpacusCanaries.attach(optimizer, loader, canaries=101)


@pytest.mark.slow
@pytest.mark.parametrize("noise", [1.0, 0.5])
def test_the_digits_example_in_one_run(noise: float, record_property: Any) -> None:
    datasets = pytest.importorskip("sklearn.datasets")
    features, labels = datasets.load_digits(return_X_y=True)
    x = torch.tensor(features / 16.0, dtype=torch.float32)
    model, optimizer, loader = _private(x, torch.tensor(labels))
    audit = OpacusCanaries.attach(optimizer, loader, canaries=1000, seed=100)
    optimizer.noise_multiplier = noise  # 0.5: a planted bug, half the declared noise
    _train(model, optimizer, loader, 3)
    row = audit.audit((1e-5,)).rows[0]
    record_property("estimates", [(e.estimator, e.epsilon_lower) for e in row.estimates])
    if noise == 1.0:
        assert audit.audit((1e-5,)).verdict == canaries.NO_VIOLATION
        assert not row.curve_rejected
        assert 0 < row.estimates[0].epsilon_lower < row.certified_upper
    else:
        assert row.curve_rejected and row.estimates[1].epsilon_lower > row.certified_upper

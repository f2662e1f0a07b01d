"""Training scripts a careless user or plugin author writes, which the Opacus tracker must refuse
or flag by cause: a normaliser copied from the optimizer and declared public, samplers that
draw more than their parameters say, a second optimizer on parameters the DP one skips, noise
smaller than the accounted multiplier, a multiplier edited mid-run, clipping at an infinite
norm and a batch used for two noisy steps."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.integrations.opacus_noise import FALSE_ALARM, chi2_lower_tail

torch = pytest.importorskip("torch")
pytest.importorskip("opacus")

from opacus import PrivacyEngine  # noqa: E402
from torch.utils.data import BatchSampler, DataLoader, RandomSampler  # noqa: E402

from dpledger.integrations.opacus import OpacusTracker, make_private  # noqa: E402
from tests.integrations.planted_training._common import data, model, train  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*[Ss]ecure RNG turned off"),
    pytest.mark.filterwarnings("ignore:Full backward hook is firing"),
    pytest.mark.filterwarnings("ignore:Optimal order is the"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]
N, BATCH = 200, 20


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _private(
    *, net: Any = None, params: Any = None, loader: Any = None, clip: float = 1.0, **kw: Any
) -> tuple[Any, ...]:
    """``make_private`` of dpledger on the tiny model, Poisson sampling unless told."""
    net = net if net is not None else model()
    optimizer = torch.optim.SGD(params if params is not None else net.parameters(), lr=0.1)
    return make_private(
        PrivacyEngine(),
        module=net,
        optimizer=optimizer,
        data_loader=loader if loader is not None else DataLoader(data(N), batch_size=BATCH),
        noise_multiplier=1.0,
        max_grad_norm=clip,
        **kw,
    )


def _causes(tracker: Any) -> dict[str, Any]:
    return {f.cause: f for f in tracker.findings if f.severity == "flagged"}


def test_the_optimizers_derived_normaliser_declared_public_is_flagged() -> None:
    # 210 records in batches of 20: make_private derives int(210 / 11) = 19, not the chosen 20
    net = model()
    engine = PrivacyEngine()
    source = DataLoader(data(210), batch_size=BATCH)
    net, optimizer, loader = engine.make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=source,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    assert optimizer.expected_batch_size == 19
    tracker = OpacusTracker.attach(
        engine, optimizer, loader, public_normaliser=19, module=net, source_loader=source
    )
    finding = _causes(tracker)["private_normaliser"]
    assert finding.voids and "not the batch size 20" in finding.message
    # the chosen batch size, set as the divisor and declared, is not flagged
    net2 = model()
    engine2 = PrivacyEngine()
    net2, opt2, loader2 = engine2.make_private(
        module=net2,
        optimizer=torch.optim.SGD(net2.parameters(), lr=0.1),
        data_loader=source,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )
    opt2.expected_batch_size = BATCH
    clean = OpacusTracker.attach(
        engine2, opt2, loader2, public_normaliser=BATCH, module=net2, source_loader=source
    )
    assert not _causes(clean)


class _ExtraRecords(BatchSampler):
    """Every third batch also carries record 0 five times: its inclusion rate is not 1/10."""

    def __iter__(self) -> Iterator[list[int]]:
        for i, batch in enumerate(super().__iter__()):
            yield batch + ([0] * 5 if i % 3 == 0 else [])


class _SamePermutationTwice(RandomSampler):
    """A permutation whose first ten places all hold record 0 (the count of batches is right)."""

    def __iter__(self) -> Iterator[int]:
        order = list(super().__iter__())
        yield from [0] * 10 + order[10:]


class _LongerLength(BatchSampler):
    def __len__(self) -> int:
        return 5


@pytest.mark.parametrize(
    "loader",
    [
        lambda ds: DataLoader(ds, batch_sampler=_ExtraRecords(RandomSampler(ds), BATCH, False)),
        lambda ds: DataLoader(ds, sampler=_SamePermutationTwice(ds), batch_size=BATCH),
        lambda ds: DataLoader(ds, batch_sampler=_LongerLength(RandomSampler(ds), BATCH, False)),
    ],
    ids=["batch_sampler_iter", "sampler_iter", "batch_sampler_len"],
)
def test_a_sampler_subclass_that_draws_otherwise_is_refused(loader: Any) -> None:
    with pytest.raises(UnsupportedEventError, match=r"overrides __(iter|len)__"):
        _private(loader=loader(data(N)), poisson_sampling=False)


def test_parameters_trained_by_a_second_optimizer_are_flagged() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    # the DP optimizer holds the first layer only; a plain SGD trains the head
    out = _private(net=net, params=net[0].parameters(), poisson_sampling=False)
    module, optimizer, loader, tracker = out
    plain = torch.optim.SGD(net[1].parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    for xb, yb in loader:
        optimizer.zero_grad()
        plain.zero_grad()
        loss_fn(module(xb), yb).backward()
        optimizer.step()
        plain.step()
        for p in net[1].parameters():
            p.grad_sample = None
    finding = _causes(tracker)["parameters_outside_optimizer"]
    assert finding.voids and "1.weight" in finding.message
    assert not tracker.result(1e-5).covered


def test_noise_halved_inside_add_noise_is_flagged() -> None:
    net = model()
    engine = PrivacyEngine()
    net, optimizer, loader = engine.make_private(
        module=net,
        optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        data_loader=DataLoader(data(N), batch_size=BATCH),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=False,
    )
    original = optimizer.add_noise

    def half() -> None:  # a plugin that halves the noise and restores the multiplier
        sigma = optimizer.noise_multiplier
        optimizer.noise_multiplier = sigma / 2
        original()
        optimizer.noise_multiplier = sigma

    optimizer.add_noise = half  # before attach: the tracker wraps it
    tracker = OpacusTracker.attach(engine, optimizer, loader, module=net)
    train(net, optimizer, loader)
    finding = _causes(tracker)["noise_not_added"]
    match = re.search(r"about ([0-9.]+) times", finding.message)
    assert match is not None
    ratio = float(match.group(1))
    assert finding.voids and 0.3 < ratio < 0.7  # half the accounted standard deviation
    assert {s.noise_multiplier for s in tracker.steps} == {1.0}
    assert not tracker.result(1e-5).covered


def test_add_noise_replaced_after_attach_is_flagged() -> None:
    module, optimizer, loader, tracker = _private(poisson_sampling=False)
    original = type(optimizer).add_noise
    optimizer.add_noise = lambda: original(optimizer)
    train(module, optimizer, loader)
    assert "replaced after the tracker" in _causes(tracker)["noise_not_added"].message


def test_correct_noise_is_not_flagged_and_the_tail_bound_is_chernoffs() -> None:
    module, optimizer, loader, tracker = _private(poisson_sampling=False)
    train(module, optimizer, loader, epochs=2)
    assert "noise_not_added" not in _causes(tracker)
    watch = tracker._noise_watch
    assert watch.coordinates == 10 * 20  # 10 parameters, 20 noisy steps
    assert 0.5 < watch.total / watch.coordinates < 1.6
    scipy_stats = pytest.importorskip("scipy.stats")
    for d, r in ((100, 0.25), (200, 0.6), (1000, 0.9)):
        exact = float(scipy_stats.chi2.cdf(r * d, d))
        assert exact <= chi2_lower_tail(r * d, d) <= 1.0
    assert chi2_lower_tail(0.25 * 100, 100) < FALSE_ALARM


def test_a_multiplier_edited_mid_run_is_accounted_at_the_one_that_ran() -> None:
    module, optimizer, loader, tracker = _private(poisson_sampling=False)
    loss_fn = torch.nn.CrossEntropyLoss()
    for i, (xb, yb) in enumerate(loader):
        if i == 3:
            optimizer.noise_multiplier = 0.3
        optimizer.zero_grad()
        loss_fn(module(xb), yb).backward()
        optimizer.step()
    assert [s.noise_multiplier for s in tracker.steps] == [1.0] * 3 + [0.3] * 7
    assert "noise_changed" in {f.cause for f in tracker.findings}
    assert "noise_not_added" not in _causes(tracker)
    # and a multiplier of 0 cannot be given a bound
    module, optimizer, loader, tracker = _private(poisson_sampling=False)
    optimizer.noise_multiplier = 0.0
    train(module, optimizer, loader, limit=1)
    with pytest.raises(InvalidParameterError, match="noise_multiplier"):
        tracker.result(1e-5)


def test_clipping_at_an_infinite_norm_releases_nothing_of_the_data() -> None:
    # the noise is scaled to the norm: an infinite norm gives non-finite parameters whatever
    # the data, so the (finite) bound still covers what is released
    module, optimizer, loader, _ = _private(poisson_sampling=False, clip=float("inf"))
    train(module, optimizer, loader, limit=2)
    assert all(not torch.isfinite(p).any() for p in module.parameters())


def test_one_batch_for_two_noisy_steps_is_refused() -> None:
    module, optimizer, loader, tracker = _private(poisson_sampling=False)
    loss_fn = torch.nn.CrossEntropyLoss()
    with pytest.raises(UnsupportedEventError, match="without a batch drawn"):
        for xb, yb in loader:
            for _ in range(2):
                optimizer.zero_grad()
                loss_fn(module(xb), yb).backward()
                optimizer.step()
        tracker.result(1e-5)


def test_a_second_dp_optimizer_on_the_same_parameters_is_flagged() -> None:
    from opacus.optimizers import DPOptimizer

    module, optimizer, loader, tracker = _private(poisson_sampling=False)
    # a second, untracked DP optimizer at a tenth of the noise, on the same parameters
    other = DPOptimizer(
        torch.optim.SGD(module.parameters(), lr=0.1),
        noise_multiplier=0.1,
        max_grad_norm=1.0,
        expected_batch_size=BATCH,
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    for i, (xb, yb) in enumerate(loader):
        for opt in (optimizer, other) if i < 3 else (optimizer,):
            opt.zero_grad()
            loss_fn(module(xb), yb).backward()
            opt.step()
    finding = _causes(tracker)["parameters_updated_outside"]
    assert finding.voids and finding.step == 2
    assert not tracker.result(1e-5).covered


def test_one_optimizer_with_its_memory_manager_is_not_flagged() -> None:
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    module, optimizer, loader, tracker = _private(poisson_sampling=False)
    loss_fn = torch.nn.CrossEntropyLoss()
    with BatchMemoryManager(
        data_loader=loader, max_physical_batch_size=5, optimizer=optimizer
    ) as small:
        for xb, yb in small:
            optimizer.zero_grad()
            loss_fn(module(xb), yb).backward()
            optimizer.step()
    assert len(tracker.steps) == N // BATCH
    assert not {"parameters_updated_outside", "noise_not_added"} & set(_causes(tracker))


def _train_changing(loader: Any, module: Any, optimizer: Any, change: Any) -> None:
    loss_fn = torch.nn.CrossEntropyLoss()
    for i, (xb, yb) in enumerate(loader):
        if i == 2:
            change()
        optimizer.zero_grad()
        loss_fn(module(xb), yb).backward()
        optimizer.step()


def test_a_poisson_rate_raised_mid_run_is_flagged() -> None:
    module, optimizer, loader, tracker = _private()
    optimizer.expected_batch_size = BATCH
    sampler = loader.batch_sampler

    def raise_rate() -> None:  # read by Opacus's sampler at every batch
        sampler.sample_rate = 0.5

    _train_changing(loader, module, optimizer, raise_rate)
    finding = _causes(tracker)["sampler_changed"]
    assert finding.voids and finding.step == 3 and "0.5" in finding.message
    assert tracker.batching.sample_rate < 0.11  # still the booked rate


def test_weights_edited_in_place_mid_run_are_flagged() -> None:
    from torch.utils.data import WeightedRandomSampler

    weights = torch.ones(N, dtype=torch.float64)
    sampler = WeightedRandomSampler(weights, num_samples=N, replacement=True)
    loader = DataLoader(data(N), sampler=sampler, batch_size=BATCH)
    module, optimizer, loader, tracker = _private(loader=loader, poisson_sampling=False)

    def favour_record_zero() -> None:
        weights[0] = 1000.0

    _train_changing(loader, module, optimizer, favour_record_zero)
    assert _causes(tracker)["sampler_changed"].voids


def test_unchanged_samplers_raise_no_change() -> None:
    for poisson in (True, False):
        module, optimizer, loader, tracker = _private(poisson_sampling=poisson)
        train(module, optimizer, loader, epochs=2)
        assert "sampler_changed" not in _causes(tracker)


@pytest.mark.parametrize("poisson", [True, False])
def test_a_collate_fn_that_adds_a_record_to_every_batch_is_flagged(poisson: bool) -> None:
    from torch.utils.data import default_collate

    dataset = data(N)

    def with_record_zero(batch: list[Any]) -> Any:  # record 0 in every batch, five times
        return default_collate([*batch, *([dataset[0]] * 5)])

    loader = DataLoader(dataset, batch_size=BATCH, shuffle=True, collate_fn=with_record_zero)
    module, optimizer, loader, tracker = _private(loader=loader, poisson_sampling=poisson)
    optimizer.expected_batch_size = BATCH
    train(module, optimizer, loader, limit=3)
    finding = _causes(tracker)["rows_not_drawn"]
    assert finding.voids and finding.step == 1
    assert "drew" in finding.message and "clipped" in finding.message


def _memory_manager_run(poisson: bool, step_every: int) -> Any:
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    module, optimizer, loader, tracker = _private(poisson_sampling=poisson)
    optimizer.expected_batch_size = BATCH
    loss_fn = torch.nn.CrossEntropyLoss()
    with BatchMemoryManager(
        data_loader=loader, max_physical_batch_size=5, optimizer=optimizer
    ) as small:
        for i, (xb, yb) in enumerate(small):
            loss_fn(module(xb), yb).backward()
            if i % step_every == step_every - 1:  # optimizer.step skipped on the others
                optimizer.step()
                optimizer.zero_grad()
    return tracker


def test_memory_manager_with_skipped_steps_is_refused_or_accounted() -> None:
    # Poisson batches: Opacus itself refuses gradients accumulated across physical batches
    with pytest.raises(ValueError, match="not compatible with grad accumulation"):
        _memory_manager_run(True, 8)
    # shuffled batches: the steps that ran summed several logical batches, flagged; the
    # per-epoch bound (each record in one noisy step per epoch) is the full epoch's
    skipped = _memory_manager_run(False, 8)
    every = _memory_manager_run(False, 1)
    assert "accumulated_batches" in _causes(skipped)
    assert any(s.batches > 1 for s in skipped.steps)
    assert skipped.result(1e-5).epsilon == every.result(1e-5).epsilon

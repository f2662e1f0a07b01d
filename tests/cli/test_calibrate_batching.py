"""`dpledger calibrate` for shuffled batches and random allocation: the noise multiplier meets
the target, 0.1 % less does not, and a bad combination of options is one line."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest

from dpledger.cli import build_parser, main
from dpledger.commands.calibrate import certify
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)

pytest.importorskip("dpledger.accountant.calibrate")

from dpledger.accountant.select import account

DELTA = 1e-5


def _shuffled(sigma: float) -> Event:
    return SelfComposedEvent(ShuffledBatchesEvent(1000, 100, GaussianEvent(sigma)), 4)


def _allocation(sigma: float) -> Event:
    return SelfComposedEvent(RandomAllocationEvent(10, GaussianEvent(sigma)), 2)


#: the noise multiplier the shuffled case below calibrates (to 1e-4)
CALIBRATED_SHUFFLED = 4.3247


def _argv(text: str) -> list[str]:
    return text.split()


CASES = [
    (
        _argv("--epsilon 4 --batching shuffled --dataset-size 1000 --batch-size 100 --epochs 4"),
        _shuffled,
        Adjacency(relation="replace_one"),
        {"batching": "shuffled", "dataset_size": 1000, "batch_size": 100, "epochs": 4},
    ),
    (
        # a narrow search range keeps the search fast
        _argv(
            "--epsilon 1.5 --batching random-allocation --steps 10 --epochs 2 "
            "--min-sigma 1 --max-sigma 4"
        ),
        _allocation,
        Adjacency(relation="add_remove"),
        {"batching": "random-allocation", "steps": 10, "allocations": 1, "epochs": 2},
    ),
]


@pytest.mark.parametrize(
    ("argv", "make_event", "adjacency", "fields"), CASES, ids=["shuffled", "allocation"]
)
def test_the_calibrated_sigma_meets_the_target_and_less_does_not(
    argv: list[str],
    make_event: Callable[[float], Event],
    adjacency: Adjacency,
    fields: dict[str, object],
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert main(["calibrate", "--delta", str(DELTA), "--json", *argv]) == 0
    out = json.loads(capfd.readouterr().out)
    target = out["target_epsilon"]
    sigma = out["noise_multiplier"]
    assert {k: out[k] for k in fields} == fields
    assert out["adjacency"] == adjacency.relation and not out["at_min_sigma"]
    bound = account(make_event(sigma), adjacency, delta=DELTA).bound
    assert bound.epsilon == out["epsilon"] <= target
    assert bound.epsilon_lower == out["epsilon_lower"]
    less = account(make_event(sigma * (1 - 1e-3)), adjacency, delta=DELTA).bound
    assert less.epsilon > target
    if fields["batching"] == "shuffled":
        assert sigma == pytest.approx(CALIBRATED_SHUFFLED, rel=1e-4)


def test_the_search_floor_of_shuffled_batches_misses_the_target() -> None:
    # shuffled batches are certified with no amplification: 4 epochs cost at least 4 Gaussian
    # releases of sensitivity 2, whose exact delta at the floor already exceeds the target
    from dpledger.accountant.calibrate import analytic_gaussian_sigma
    from dpledger.accountant.conversions import gaussian_delta_bracket

    floor = analytic_gaussian_sigma(4.0, DELTA, sensitivity=2 * math.sqrt(4)) * (1 - 1e-6)
    assert gaussian_delta_bracket(4.0, 2 * math.sqrt(4) / floor)[0] > DELTA
    assert floor < CALIBRATED_SHUFFLED


SHUFFLED = "--batching shuffled --dataset-size 100 --batch-size 10 --epochs 2"
ALLOCATION = "--batching random-allocation --steps 10"
BAD = [
    ("--batching fixed", "--batching: unknown batching 'fixed'"),
    ("--batching shuffled --batch-size 10 --epochs 2", "--dataset-size: is required"),
    ("--batching shuffled --dataset-size 100 --batch-size 10", "--epochs: is required"),
    (f"{SHUFFLED} --steps 10", "--steps: does not apply to --batching shuffled"),
    (f"{SHUFFLED} --sampling-rate 0.1", "--sampling-rate: does not apply to --batching shuffled"),
    (f"{SHUFFLED} --allocations 2", "--allocations: does not apply to --batching shuffled"),
    (f"{SHUFFLED} --batch-size 200", "--batch-size: 200 exceeds --dataset-size 100"),
    (
        f"{SHUFFLED} --adjacency add_remove",
        "--adjacency: is add_remove, but shuffled batches are analysed under replace_one",
    ),
    ("--batching random-allocation", "--steps: is required with --batching random-allocation"),
    (f"{ALLOCATION} --sampling-rate 0.1", "--sampling-rate: does not apply to --batching random"),
    (f"{ALLOCATION} --batch-size 10", "--batch-size: does not apply to --batching random"),
    (f"{ALLOCATION} --allocations 11", "--allocations: 11 exceeds --steps 10"),
    (f"{ALLOCATION} --allocations 0", "--allocations: must be an integer >= 1"),
    (
        f"{ALLOCATION} --adjacency replace_one",
        "--adjacency: is replace_one, but random allocations are analysed under add_remove",
    ),
    (f"{ALLOCATION} --epochs 0", "--epochs: must be an integer >= 1"),
    ("--epochs 3", "--epochs: does not apply to --batching poisson"),
    ("--dataset-size 100", "--dataset-size: does not apply to --batching poisson"),
    ("--allocations 2", "--allocations: does not apply to --batching poisson"),
]


@pytest.mark.parametrize(("options", "message"), BAD)
def test_a_bad_combination_names_the_option_and_the_fix(options: str, message: str) -> None:
    parser = build_parser(only="calibrate")
    args = parser.parse_args(_argv(f"calibrate --epsilon 2 --delta 1e-5 {options}"))
    with pytest.raises(InvalidParameterError) as info:
        certify(args)
    text = str(info.value)
    assert text.startswith(message) and ". Fix: " in text and "\n" not in text


def test_a_bad_combination_exits_2_with_one_line(capfd: pytest.CaptureFixture[str]) -> None:
    argv = ["--epsilon", "2", "--delta", "1e-5", "--batching", "shuffled", "--steps", "10"]
    assert main(["calibrate", *argv]) == 2
    captured = capfd.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("dpledger calibrate: error: --steps: does not apply")
    assert "Fix: remove --steps" in lines[0]

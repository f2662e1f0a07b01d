"""``dpledger audit --opacus SCRIPT.py[:FUNCTION] --one-run``: audit an Opacus training run.

The script is imported (not run as ``__main__``) and its function (default
:data:`DEFAULT_FUNCTION`) is called with no argument. It returns
``(model, optimizer, data_loader, train)``: the three objects ``PrivacyEngine.make_private``
returned, with Poisson sampling, and a function ``train(model, optimizer, data_loader)`` that
runs the training loop. :class:`~dpledger.audit.opacus_canaries.OpacusCanaries` is attached
between the two, ``train`` runs once, and each estimator's epsilon lower bound is printed beside
the certified bracket of the steps taken at the noise multiplier, clip norm and sampling rate
read at attach time, with its confidence. The clean room recomputes every certified upper
bound printed (the declaration of ``dp_sgd_logistic`` with these hyper-parameters is the same
event) before the verdict is. Exit status as for a method's one-run audit: 1 on a violation,
0 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from dpledger.commands._audit_one_run import format_one_run
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError

__all__ = ["DEFAULT_FUNCTION", "load_training", "run_opacus"]

#: the function a training script exposes for ``--opacus SCRIPT.py``
DEFAULT_FUNCTION = "opacus_training"
#: what the script's function returns, named in every refusal about it
RETURNS = (
    "returning (model, optimizer, data_loader, train): what PrivacyEngine.make_private "
    "returned, and train(model, optimizer, data_loader) running the training loop"
)
FORM = f"define {DEFAULT_FUNCTION}() {RETURNS}"
#: options of other audits (their defaults): given with --opacus, each is refused
OTHER_OPTIONS = {
    "method": None,
    "mechanism": None,
    "config": None,
    "data": None,
    "relation": None,
    "runs": None,
    "claimed_epsilon": None,
    "noise_multiplier": None,
    "epsilon": None,
    "sampling_rate": None,
    "search_samples": None,
    "black_box": False,
    "buckets": 2,
    "adjacency": "add_remove",
    "count": 1,
    "samples": 1_000_000,
}
#: the builtin method whose declaration, at the run's hyper-parameters, is the audited event
CONFIRMED_BY = "dp_sgd_logistic"
Confirm = Callable[[argparse.Namespace, str, Any, Adjacency, dict[str, Any]], int]


def _check_options(args: argparse.Namespace) -> None:
    if not args.one_run:
        raise InvalidParameterError(
            "--opacus", "audits a training run in one run only", "add --one-run"
        )
    for name, default in OTHER_OPTIONS.items():
        if getattr(args, name, default) != default:
            flag = "METHOD" if name == "method" else "--" + name.replace("_", "-")
            raise InvalidParameterError(
                flag, "does not apply to an Opacus training run's audit", "drop it"
            )
    if args.mode == "black-box":
        raise InvalidParameterError(
            "--mode",
            "black-box is not available for an Opacus training run (its canaries are "
            "gradients seen at every noisy step)",
            "drop --mode, or use --mode white-box",
        )
    if not 0 < args.alpha < 1:
        raise InvalidParameterError("alpha", f"must lie in (0, 1), got {args.alpha!r}", "0.05")
    if any(not 0 < d < 1 for d in args.delta):
        raise InvalidParameterError(
            "--delta", f"must lie in (0, 1), got {args.delta!r}", "pass e.g. --delta 1e-5"
        )
    if args.seed is not None and args.seed < 0:
        raise InvalidParameterError(
            "seed", f"must be an integer >= 0, got {args.seed!r}", "pass e.g. --seed 0"
        )


def _split(spec: str) -> tuple[Path, str]:
    path, sep, name = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not name.isidentifier():
        path, name = spec, DEFAULT_FUNCTION
    return Path(path), name


def load_training(spec: str) -> Callable[[], Any]:
    """The function ``SCRIPT.py[:FUNCTION]`` names (the script imported, not run as main)."""
    path, name = _split(spec)
    if path.suffix != ".py" or not path.is_file():
        raise InvalidParameterError(
            "--opacus", f"{str(path)!r} is not a Python file", "pass a training script: SCRIPT.py"
        )
    module_spec = importlib.util.spec_from_file_location(f"_dpledger_opacus_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise InvalidParameterError("--opacus", f"cannot import {path}", "pass a .py file")
    module = importlib.util.module_from_spec(module_spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # its own imports of sibling modules
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise InvalidParameterError(
            "--opacus",
            f"importing {path.name} raised {type(exc).__name__}: {first}",
            f"run `python {path}` to see where",
        ) from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    function = getattr(module, name, None)
    if not callable(function):
        fix = f"define {name}() {RETURNS}"
        raise InvalidParameterError("--opacus", f"{path.name} has no function {name}()", fix)
    return function  # type: ignore[no-any-return]


def _objects(value: Any) -> tuple[Any, Any, Any, Callable[..., Any]]:
    """The four objects the training function returned, checked."""
    if not isinstance(value, tuple | list) or len(value) != 4 or not callable(value[3]):
        raise InvalidParameterError(
            "--opacus", "the training function returned something else", FORM
        )
    from opacus.grad_sample import GradSampleModule

    model, optimizer, loader, train = value
    if not isinstance(model, GradSampleModule):
        raise InvalidParameterError(
            "model",
            f"{type(model).__name__} computes no per-sample gradients",
            "return the module PrivacyEngine.make_private returned (a GradSampleModule), "
            "with layers Opacus supports",
        )
    return model, optimizer, loader, train


@attrs.frozen
class _Hyper:
    """The hyper-parameters of :data:`CONFIRMED_BY` the clean room declares it with."""

    steps: int
    sampling_probability: float
    noise_multiplier: float
    clip_norm: float
    expected_batch_size: float = 1.0  # not part of the declaration


def _confirm(args: argparse.Namespace, result: Any, audit: Any, confirm: Confirm) -> int:
    """The clean room recomputes the certified upper bound printed at each delta."""
    params = _Hyper(len(audit.steps), audit.rate, audit.noise_multiplier, audit.clip)
    pairs = [(row.delta, row.certified_upper) for row in result.rows]
    return confirm(args, CONFIRMED_BY, params, Adjacency(), {"add_remove": pairs})


def run_opacus(args: argparse.Namespace, confirm: Confirm) -> int:
    """The one-run audit of the training run ``--opacus`` names."""
    from dpledger.audit.opacus_canaries import OpacusCanaries
    from dpledger.commands._audit_one_run import _canaries

    _check_options(args)
    canaries = _canaries(args.canaries)
    function = load_training(args.opacus)
    model, optimizer, loader, train = _objects(function())
    audit = OpacusCanaries.attach(optimizer, loader, canaries=canaries, seed=args.seed)
    train(model, optimizer, loader)
    if not audit.steps:
        raise InvalidParameterError(
            "--opacus",
            "the training function took no optimizer step",
            "call optimizer.step() in train(model, optimizer, data_loader)",
        )
    result = audit.audit(tuple(args.delta), args.alpha, score=args.score or "llr")
    result = attrs.evolve(result, method=f"opacus {_split(args.opacus)[0].name}", seed=args.seed)
    if code := _confirm(args, result, audit, confirm):
        return code
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    else:
        print(format_one_run(result))
    return 1 if result.verdict == "violation" else 0

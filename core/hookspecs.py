"""The hooks a dpledger plugin can implement (pluggy project name ``"dpledger"``).

Every hook receives a ``register`` callable and calls it once per spec; it returns nothing.
The callable (rather than returned lists) lets the host attribute every spec to the plugin that
registered it, validate it on the spot, and reject duplicates by name, naming both plugins.

A plugin is a module (or any object) with functions marked ``@hookimpl``::

    from dpledger.core.hookspecs import hookimpl

    @hookimpl
    def dpledger_register_methods(register):
        register(MY_METHOD_SPEC)

and is announced in its distribution's ``pyproject.toml``::

    [project.entry-points.dpledger]
    my_plugin = "my_package.plugin"
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from dpledger.core.specs import MechanismSpec, MethodSpec, ReportSectionSpec

PROJECT_NAME = "dpledger"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def dpledger_register_methods(register: Callable[[MethodSpec], None]) -> None:
    """Register private methods (:class:`~dpledger.core.specs.MethodSpec`).

    Call ``register`` once per method. Names must be unique across all plugins.

    Example::

        @hookimpl
        def dpledger_register_methods(register):
            register(MethodSpec(
                name="noisy_sum",
                params=NoisySumParams,
                declare=lambda p, adjacency: GaussianEvent(p.noise_multiplier),
                run=run_noisy_sum,
                description="Gaussian noise on the sum of clipped rows",
                proof="Dwork & Roth 2014, Theorem A.1",
            ))
    """


@hookspec
def dpledger_register_mechanisms(register: Callable[[MechanismSpec], None]) -> None:
    """Register new leaf mechanism events (:class:`~dpledger.core.specs.MechanismSpec`).

    Each spec brings an event class and at least one accountant characterisation: a mapping
    onto core events that is at least as lossy (``to_core``) or a certified privacy profile.

    Example::

        @hookimpl
        def dpledger_register_mechanisms(register):
            register(MechanismSpec(
                name="staircase",
                event_class=StaircaseEvent,
                description="Staircase mechanism, pure epsilon-DP",
                proof="Geng & Viswanath 2014, Theorem 3",
                to_core=lambda e: PureDPEvent(e.epsilon),
            ))
    """


@hookspec
def dpledger_register_report_sections(register: Callable[[ReportSectionSpec], None]) -> None:
    """Register extra report sections (:class:`~dpledger.core.specs.ReportSectionSpec`).

    Example::

        @hookimpl
        def dpledger_register_report_sections(register):
            register(ReportSectionSpec(
                name="training_notes",
                title="Training notes",
                render=lambda context: f"Methods used: {', '.join(context['methods'])}",
            ))
    """


#: names of all hooks, in documentation order
HOOK_NAMES: tuple[str, ...] = (
    "dpledger_register_methods",
    "dpledger_register_mechanisms",
    "dpledger_register_report_sections",
)

"""Exception types. Every error names the offending field and how to fix it."""

from __future__ import annotations


class DPLedgerError(Exception):
    """Base class of all dpledger errors."""


class InvalidParameterError(DPLedgerError, ValueError):
    """A parameter is out of its valid range.

    The message always has the form ``<field>: <problem>. Fix: <how>``.
    """

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}: {problem}. Fix: {fix}")


class UnsupportedEventError(DPLedgerError, TypeError):
    """An accountant cannot characterise an event (possibly nested)."""


class BoundUnavailable(DPLedgerError):
    """A backend could not produce a bound; callers fall back or refuse, never guess."""

    def __init__(self, method: str, reason: str) -> None:
        self.method = method
        self.reason = reason
        super().__init__(f"{method}: bound unavailable ({reason})")


class BackendInconsistencyError(DPLedgerError):
    """One backend's certified lower bound exceeds another's certified upper bound."""


class GraphError(DPLedgerError, ValueError):
    """A composition graph is malformed (cycle, ambiguous path, unknown node)."""


class LiftingError(DPLedgerError, ValueError):
    """A release cannot be lifted from row level to the privacy unit."""


class PipelineFileError(DPLedgerError, ValueError):
    """A pipeline description file is malformed."""


class PluginError(DPLedgerError):
    """A plugin failed to load, declared a malformed spec, or misbehaved."""


class LedgerViolationError(DPLedgerError):
    """A run executed more privacy-relevant work than its method declared."""


class PluginConflictError(PluginError, InvalidParameterError):
    """Two third-party plugins registered the same name or event kind; neither is chosen."""


class IntegrityError(PluginError):
    """A plugin changed dpledger's own code: nothing can be certified in this process."""

    def __init__(self, message: str, *, plugin: str, distribution: str | None) -> None:
        self.plugin = plugin
        self.distribution = distribution
        super().__init__(message)

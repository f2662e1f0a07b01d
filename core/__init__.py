"""The kernel: mechanism events, adjacency, lifting rules, method specs, plugin hooks.

The orchestration modules that used to live here moved to ``dpledger.runtime``; their old
import paths still work and warn (see :mod:`dpledger.core.moved`).
"""

from dpledger.core import moved as _moved

_moved.install()

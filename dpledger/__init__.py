"""dpledger: how much privacy does this pipeline spend?"""

from __future__ import annotations

from pkgutil import extend_path

# The repository keeps ``dpledger/`` (the command line) beside ``core/``, ``accountant/``, ...
# which an install maps under this package. Run from a checkout with dpledger installed
# normally, ``./dpledger`` comes first on ``sys.path``: extending the package path to every
# ``dpledger`` folder on ``sys.path`` lets ``dpledger.core`` resolve to the installed copy.
__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"

__all__ = ["__version__"]

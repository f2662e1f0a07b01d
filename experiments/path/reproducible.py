"""Commands that run the same in every process.

Private-PGM (``mbi``) orders some factor axes by Python's string hashing, so a fit with a cycle
among its cliques (Direct-Across) differs from process to process in its last float32 digits,
and its samples with them, unless the hash seed is fixed. The commands fix it.
"""

from __future__ import annotations

import os
import sys

#: the ``PYTHONHASHSEED`` every command runs with
HASH_SEED = "0"


def fix_hash_seed() -> None:
    """Run this command again with ``PYTHONHASHSEED`` at :data:`HASH_SEED` unless it is."""
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        env = {**os.environ, "PYTHONHASHSEED": HASH_SEED}
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)

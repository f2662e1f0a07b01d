"""Sub-commands of the ``dpledger`` CLI, one module each (``register(subparsers)``)."""

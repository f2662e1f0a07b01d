"""Builtin primitive methods: each module is a plugin announced in the ``dpledger`` entry points."""

#: module names of the builtin primitive plugins (each is also an entry point of dpledger)
PRIMITIVE_MODULES: tuple[str, ...] = (
    "bounded_mean",
    "dp_sgd",
    "gaussian",
    "histogram",
    "laplace",
    "nn_voting",
    "selection",
)

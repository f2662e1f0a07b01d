"""Privacy profiles of leaf mechanisms, in both neighbouring directions.

A profile is the hockey-stick curve ``delta(eps) = sup_S P(S) - e^eps Q(S)`` of the pair
``(P, Q) = (M(D), M(D'))``. Each :class:`Profile` returns *upper bounds* (exact closed forms
evaluated stably, inflated by a relative margin for floating-point error) and the finite range
of privacy-loss values outside which the remaining mass is negligible.

Noise is in units of the per-unit add/remove contribution bound ``C``; the adjacency supplies the
factor 2 of replace-one (see :func:`~dpledger.accountant.leaves.leaf_profiles`).

The profiles live in one module per mechanism family: the curve types and generic curves
(:mod:`~dpledger.accountant.profiles_base`), unsampled base mechanisms
(:mod:`~dpledger.accountant.profiles_noise`), Poisson subsampling and replace-one
(:mod:`~dpledger.accountant.profiles_sampled`), shuffled batches and lower curves of finite
pairs (:mod:`~dpledger.accountant.profiles_shuffled`) and tabulated curves
(:mod:`~dpledger.accountant.profiles_tabulated`); this module re-exports their names.
"""

from __future__ import annotations

from dpledger.accountant.profiles_base import (
    ACCURATE_LOSS,
    GAUSS_SPAN,
    REL_MARGIN,
    Array,
    DirectedProfiles,
    Profile,
    discrete_delta,
    gauss_span,
    identical_profile,
    noise_factor,
    self_dual,
    symmetric_profiles,
)
from dpledger.accountant.profiles_noise import (
    approx_dp_profile,
    attained_base,
    base_profile,
    bounded_range_profile,
    gaussian_delta,
    gaussian_profile,
    laplace_delta,
    laplace_noisy_max_epsilon,
    randomized_response_profile,
)
from dpledger.accountant.profiles_sampled import (
    INNER_ROUNDING,
    REPLACE_ONE_ROUNDING,
    REPLACE_ONE_SHARED_A,
    REPLACE_ONE_TURN,
    SUBNORMAL_GUARD,
    poisson_add,
    poisson_gaussian_replace_one,
    poisson_remove,
    replace_one_profiles,
)
from dpledger.accountant.profiles_shuffled import (
    SHUFFLE_BINS,
    SHUFFLE_LOG_TAIL,
    SHUFFLE_MAX_LOSS,
    Noise,
    gaussian_attack_profiles,
    larger_profile,
    lower_pair_profiles,
    max_of_batches_edges,
    max_of_batches_log_cdf,
    max_of_batches_pair,
    shuffled_profiles,
)
from dpledger.accountant.profiles_tabulated import (
    claimed_pair_below,
    claimed_pair_profile,
    tabulated_delta,
    tabulated_profiles,
)

__all__ = [
    "ACCURATE_LOSS",
    "GAUSS_SPAN",
    "INNER_ROUNDING",
    "REL_MARGIN",
    "REPLACE_ONE_ROUNDING",
    "REPLACE_ONE_SHARED_A",
    "REPLACE_ONE_TURN",
    "SHUFFLE_BINS",
    "SHUFFLE_LOG_TAIL",
    "SHUFFLE_MAX_LOSS",
    "SUBNORMAL_GUARD",
    "Array",
    "DirectedProfiles",
    "Noise",
    "Profile",
    "approx_dp_profile",
    "attained_base",
    "base_profile",
    "bounded_range_profile",
    "claimed_pair_below",
    "claimed_pair_profile",
    "discrete_delta",
    "gauss_span",
    "gaussian_attack_profiles",
    "gaussian_delta",
    "gaussian_profile",
    "identical_profile",
    "laplace_delta",
    "laplace_noisy_max_epsilon",
    "larger_profile",
    "lower_pair_profiles",
    "max_of_batches_edges",
    "max_of_batches_log_cdf",
    "max_of_batches_pair",
    "noise_factor",
    "poisson_add",
    "poisson_gaussian_replace_one",
    "poisson_remove",
    "randomized_response_profile",
    "replace_one_profiles",
    "self_dual",
    "shuffled_profiles",
    "symmetric_profiles",
    "tabulated_delta",
    "tabulated_profiles",
]

"""Proof records: which code object each proof covers, at which version, and how trusted it is.

A :class:`ProofRecord` ties a proof document to a code object by the SHA-256 of the object's
source (``inspect.getsource``). When the source changes, ``proofs_checks/check_registry.py``
fails until someone re-reads the proof against the new code and refreshes the hash:

    python -m dpledger.proofs_checks.registry --update dpledger.core.events.GaussianEvent
    python -m dpledger.proofs_checks.registry --add TARGET --proof proofs_checks/<folder>/proof.md
    python -m dpledger.proofs_checks.registry --check

Tiers: ``vetted`` (reviewed by a second person), ``verified`` (docs/verification.md's rule
holds, recomputed by check_tiers.py), ``contrib`` (a condition of it unmet), ``unverified``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from dpledger.core.errors import InvalidParameterError

STATUSES: tuple[str, ...] = ("vetted", "verified", "contrib", "unverified")
#: the repository root (proof paths are relative to it)
ROOT = Path(__file__).resolve().parent.parent
REGISTRY_FILE = Path(__file__).resolve()


def _status_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in STATUSES:
        raise InvalidParameterError(attribute.name, f"unknown status {value!r}", f"use {STATUSES}")


@attrs.frozen
class ProofRecord:
    """One proven code object (dotted path), its proof document and the vetted source hash."""

    target: str
    status: str = attrs.field(validator=_status_validator)
    proof: str
    source_sha256: str
    #: ``check_*.py::test_*`` of the proof's folder: the independent cross-check (``verified``)
    cross_check: str | None = None


def resolve(target: str) -> Any:
    """Import the object named by a dotted path (module prefix, then attributes)."""
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            break
        return obj
    raise InvalidParameterError("target", f"cannot import {target!r}", "give module.attribute")


def source_hash(target: str) -> str:
    """SHA-256 of ``inspect.getsource`` of the target."""
    return hashlib.sha256(inspect.getsource(resolve(target)).encode("utf-8")).hexdigest()


def stale_message(target: str) -> str:
    return (
        f"source of {target} changed since its proof was vetted; re-vet and update the hash "
        f"(python -m dpledger.proofs_checks.registry --update {target})"
    )


def stale_records(records: Iterable[ProofRecord]) -> list[str]:
    """One message per record whose target's current source hash differs from the record."""
    return [stale_message(r.target) for r in records if source_hash(r.target) != r.source_sha256]


# -- the records ---------------------------------------------------------------------------
# Add a record with: python -m dpledger.proofs_checks.registry --add TARGET --proof PATH
RECORDS: tuple[ProofRecord, ...] = (
    ProofRecord(
        target="dpledger.budget.rules._decide_renyi",
        status="contrib",
        proof="proofs_checks/budget_filters/proof.md",
        source_sha256="85e8936b9d60273a537885244afd08ca0e0331732b0a663564d91d49d010d74f",
    ),
    ProofRecord(
        target="dpledger.budget.rules.renyi_budgets",
        status="contrib",
        proof="proofs_checks/budget_filters/proof.md",
        source_sha256="2e26f199b8623beeb93b4479cff7b98bb6b5fd0fa4d33b6b845df3ebaf93370d",
    ),
    ProofRecord(
        target="dpledger.budget.rules._decide_approx",
        status="contrib",
        proof="proofs_checks/budget_filters/proof.md",
        source_sha256="d1dd588b5f12e09e1759439299ea18d8921269c095e8beb7b8e090182b112a1a",
    ),
    ProofRecord(
        target="dpledger.budget.rules.approx_level",
        status="contrib",
        proof="proofs_checks/budget_filters/proof.md",
        source_sha256="7c3285964ac30cb73c89a2a5afa598ff5954277fb60732be99c9f3bb7e0274db",
    ),
    ProofRecord(
        target="dpledger.budget.rules._decide_gdp",
        status="contrib",
        proof="proofs_checks/budget_filters/proof.md",
        source_sha256="3b89627b2364c1c9629da15cd9fb5597e21f701bebd64063acaecb38b7d40c7a",
    ),
    ProofRecord(
        target="dpledger.budget.rules.gdp_mu",
        status="contrib",
        proof="proofs_checks/budget_filters/proof.md",
        source_sha256="d0f326630869559015cce0d1361123bf732f03c2d43dc651f3c44cd9550508e2",
    ),
    ProofRecord(
        target="dpledger.budget.rules._decide_pld",
        status="contrib",
        proof="proofs_checks/budget_filters/proof.md",
        source_sha256="e14d51c525249af330c4a2295315f359d084bfdaf7a3fc1f325b2257dcc9df91",
    ),
    ProofRecord(
        target="dpledger.core.events.GaussianEvent",
        status="verified",
        proof="proofs_checks/gaussian/proof.md",
        source_sha256="33f5167f3c76940d423111178b417441dabce8690de10b2e204ffa2fd236b2fb",
        cross_check="check_gaussian.py::test_accountant_epsilon_is_an_upper_bound_and_tight",
    ),
    ProofRecord(
        target="dpledger.core.events.LaplaceEvent",
        status="verified",
        proof="proofs_checks/laplace/proof.md",
        source_sha256="f60d6d75db5a45abfcf36770be8416f7870f0f611687b9c8f6ca43f0ed1961e1",
        cross_check="check_laplace.py::test_accountant_epsilon_brackets_the_exact_value",
    ),
    ProofRecord(
        target="dpledger.core.events.PoissonSampledEvent",
        status="contrib",
        proof="proofs_checks/poisson_subsampling/proof.md",
        source_sha256="02a40260759b054793faa5ed640d16c9f728115896d44754c294480bbf16eaf1",
    ),
    ProofRecord(
        target="dpledger.core.events.SampledWithoutReplacementEvent",
        status="contrib",
        proof="proofs_checks/wor_subsampling/proof.md",
        source_sha256="4fbd9c463a2ca56858c3fa3c537fa8aa104cf58cac542a2ccc7708c0d0d1d317",
    ),
    ProofRecord(
        target="dpledger.core.events.SelfComposedEvent",
        status="verified",
        proof="proofs_checks/composition/proof.md",
        source_sha256="d758c9b774edfbb8376e3fa43440cf11bc4a76252b7867fb2eed43a02146d144",
        cross_check="check_composition.py::test_accountant_delta_is_an_upper_bound",
    ),
    ProofRecord(
        target="dpledger.core.events.ComposedEvent",
        status="contrib",
        proof="proofs_checks/composition/proof.md",
        source_sha256="fc647094cbf249f0dcc9a7b3af54d2c4491a359bda71a3b45402e53994ef23b2",
    ),
    ProofRecord(
        target="dpledger.core.event_trees.flatten",
        status="contrib",
        proof="proofs_checks/composition/proof.md",
        source_sha256="a45c93661a594b85cf968d2529fb36113621852f16a3adf8a4b9ae8d8f7353c0",
    ),
    ProofRecord(
        target="dpledger.core.event_trees.pure_epsilon",
        status="contrib",
        proof="proofs_checks/composition/proof.md",
        source_sha256="3bb642dbaf86bc3d13063376ffb3a9c87d6a0d523d2bacb67454e227b5c72651",
    ),
    ProofRecord(
        target="dpledger.core.events.RandomizedResponseEvent",
        status="contrib",
        proof="proofs_checks/composition/proof.md",
        source_sha256="5740766d710ce93675f8f2591c5bd9d4e7af218da6400d3a16dbcfb382f3840a",
    ),
    ProofRecord(
        target="dpledger.core.adjacency.Adjacency",
        status="contrib",
        proof="proofs_checks/group_privacy_lifting/proof.md",
        source_sha256="b10f525e08fef0c5981d9c5e946a60de256c122abc516741896816bf14428950",
    ),
    ProofRecord(
        target="dpledger.accountant.conversions.gaussian_delta_bracket",
        status="verified",
        proof="proofs_checks/gaussian/proof.md",
        source_sha256="e6013aaaa2452896b77826355ecb75cbf42cfc21171a9ffca0417ad3a4aed354",
        cross_check="check_gaussian_code.py::test_bracket_contains_the_exact_value_and_is_tight",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_noise.gaussian_delta",
        status="verified",
        proof="proofs_checks/gaussian/proof.md",
        source_sha256="b051091af19bb9d09e22298896b5df9629c9582f007ca67f45ac72c08443aaa0",
        cross_check="check_gaussian_code.py::test_profile_is_an_upper_bound_within_relative_margin",
    ),
    ProofRecord(
        target="dpledger.accountant.conversions.laplace_delta_bracket",
        status="verified",
        proof="proofs_checks/laplace/proof.md",
        source_sha256="2da38f462fed8c8d4a29d0f7a0edaf2c4a8e1c3a05825a45c58a40ea504c159f",
        cross_check="check_laplace_code.py::test_bracket_contains_the_exact_value",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_noise.laplace_delta",
        status="verified",
        proof="proofs_checks/laplace/proof.md",
        source_sha256="a73977eb343396913fe04728e2b24e11b55bd1b5bf61d73a53af41d3a4e51958",
        cross_check="check_laplace_code.py::test_profile_matches_every_branch",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_sampled.poisson_remove",
        status="verified",
        proof="proofs_checks/poisson_subsampling/proof.md",
        source_sha256="d85e5a4843960f2633c05fc2b30c0fd32c2ad42af2494fe4df3aa2a48b10c9e5",
        cross_check="check_poisson_code.py::test_gaussian_remove_and_add_equal_integration",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_sampled.poisson_add",
        status="verified",
        proof="proofs_checks/poisson_subsampling/proof.md",
        source_sha256="9c726bc806329aa09c1952413c255c23189a420d00fc1b0c48368f1b4fbb761a",
        cross_check="check_poisson_code.py::test_gaussian_remove_and_add_equal_integration",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_sampled.poisson_gaussian_replace_one",
        status="verified",
        proof="proofs_checks/poisson_subsampling/proof.md",
        source_sha256="319ce58a335cc8882acc02f8f01e4485e1022612627f6e33c1652026d7ca7073",
        cross_check="check_poisson_code.py::test_replace_one_mixture_equals_integration",
    ),
    ProofRecord(
        target="dpledger.accountant.conversions.kov_delta_bracket",
        status="verified",
        proof="proofs_checks/composition/proof.md",
        source_sha256="db0e8435d99ead24cde8c24f708c641c2824419711877393c42979c355ea3abd",
        cross_check="check_kov_code.py::test_bracket_contains_exact_and_is_tight",
    ),
    ProofRecord(
        target="dpledger.accountant.conversions.rdp_to_epsilon",
        status="contrib",
        proof="proofs_checks/rdp_conversion/proof.md",
        source_sha256="f6d24a32d837dfc65bfd8fd8343bba6bf3733e3123a725fb8a28ef4fa8e1c232",
    ),
    ProofRecord(
        target="dpledger.accountant.conversions.rdp_to_delta",
        status="contrib",
        proof="proofs_checks/rdp_conversion/proof.md",
        source_sha256="1e01e9bb6da588adac4b91d1e9da66b45de218fb86685af660063ff3968509ed",
    ),
    ProofRecord(
        target="dpledger.core.lifting.lift_event",
        status="contrib",
        proof="proofs_checks/group_privacy_lifting/proof.md",
        source_sha256="b7d88b585794981d29dc998b13271f80a4ded57172ad61cb86e979405a059695",
    ),
    ProofRecord(
        target="dpledger.accountant.calibrate.calibrate_noise_multiplier",
        status="verified",
        proof="proofs_checks/analytic_gaussian_calibration/proof.md",
        source_sha256="23b4bf402ce6750e4900fb9a7367365457b785619248d4434616d6f3a1cbd4e3",
        cross_check="check_analytic_gaussian_calibration.py::test_dpledger_calibration_meets_target_and_is_near_optimal",
    ),
    ProofRecord(
        target="dpledger.accountant.leaves.leaf_profiles",
        status="contrib",
        proof="proofs_checks/wor_subsampling/proof.md",
        source_sha256="d9e2d13dc154afe88e27f89cfad90b072d0383d893bab27a84b1164148335416",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_fft.compose",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="3fe70bf2cc981c72ff73cb3168f8c8541e2ab0838bb9edac6977bce9cae4059d",
    ),
    ProofRecord(
        target="dpledger.core.events.ShuffledBatchesEvent",
        status="contrib",
        proof="proofs_checks/shuffled_batches/proof.md",
        source_sha256="12eb48f028d6f8b84f2114234a5a8848e5d8a78bff8e544959de11cedcbb1abe",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_shuffled.shuffled_profiles",
        status="contrib",
        proof="proofs_checks/shuffled_batches/proof.md",
        source_sha256="a9ef6df74ffd908ce135a351388c76326df36d15693f4a1deab6bfeb6285ac0c",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_shuffled.max_of_batches_pair",
        status="contrib",
        proof="proofs_checks/shuffled_batches/proof.md",
        source_sha256="ce423e586e1960673e800a3a8b0ae791db5b34c1a659c34f168033cd2bf9d0a7",
    ),
    ProofRecord(
        target="dpledger.core.events.TabulatedProfileEvent",
        status="contrib",
        proof="proofs_checks/tabulated_profile/proof.md",
        source_sha256="a86a846fcb086af6e010dd194da0e804c51af123b1f1b6be3d68f496389f90d8",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_tabulated.tabulated_delta",
        status="contrib",
        proof="proofs_checks/tabulated_profile/proof.md",
        source_sha256="1b0c20e393cb4243f5aec03be9b46b3d63e4827852ab477cfb5c7e73a3a7d92a",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_tabulated.tabulated_profiles",
        status="contrib",
        proof="proofs_checks/tabulated_profile/proof.md",
        source_sha256="8fa23773f8ea56d0525d9ac51ab860005e04c88619d3934863fa6b043c8bc27e",
    ),
    ProofRecord(
        target="dpledger.runtime.lowering.profile_to_core",
        status="contrib",
        proof="proofs_checks/tabulated_profile/proof.md",
        source_sha256="132876c6d0886ef8f68db8188c68e0bb92472d553b4204393e65966d49baa979",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated.discretise_lower",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="66050436369fa43d86cac211043eece66577f5a2c72434da6fcd2da354ac3267",
    ),
    ProofRecord(
        target="dpledger.accountant.random_allocation._tables",
        status="contrib",
        proof="proofs_checks/random_allocation/proof.md",
        source_sha256="46e55c15b51d99e9ffe537df2f78e28e9370ee8e3ed2a5ddf545fd9a6debadee",
    ),
    ProofRecord(
        target="dpledger.accountant.random_allocation.allocation_profiles",
        status="contrib",
        proof="proofs_checks/random_allocation/proof.md",
        source_sha256="5f3531bca3456c18e48d72777dce790297424a02312c4b5560771a93640f2e6d",
    ),
    ProofRecord(
        target="dpledger.runtime.ledger_sampling.allocate",
        status="contrib",
        proof="proofs_checks/random_allocation/proof.md",
        source_sha256="85c9e6bf6d0b9a41273cb67fa943af6bcaaaca51da51601397579224bbebe293",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_split.compose_split",
        status="contrib",
        proof="proofs_checks/pld_tail_split/proof.md",
        source_sha256="d8fce4072121e61a5e9ed9f1f778e156c3c3013db723f1cb2de252be9ac28152",
    ),
    ProofRecord(
        target="dpledger.accountant.random_allocation.allocation_parts",
        status="contrib",
        proof="proofs_checks/random_allocation/proof.md",
        source_sha256="9be387df003595058ec27f5c092d2f255b4518b0e8fb7c21695bdbf675a19ceb",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_components._allocation_reduced",
        status="contrib",
        proof="proofs_checks/random_allocation/proof.md",
        source_sha256="dc174c7cde7057a220e9628a866e0a7e29dba0dd07d0920430d30313b6580523",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_ratio.allocation_ratio_pair",
        status="contrib",
        proof="proofs_checks/allocation_ratio/proof.md",
        source_sha256="b23d5fda28b6061c8c69ec58da923fb298f7e14d95e3168d666869d376ac2504",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_shuffled.larger_profile",
        status="contrib",
        proof="proofs_checks/allocation_ratio/proof.md",
        source_sha256="1321dea97a0b29175577f594cc4fe5f80fbbdeee3fc6f6c7a6d03c7206b70a5d",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_shuffled.gaussian_attack_profiles",
        status="contrib",
        proof="proofs_checks/allocation_ratio/proof.md",
        source_sha256="dc843bb947c760cc81e380416c16516607f1e65016c5c136213d8efc1ad7ac27",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_fft._SpectrumProduct.add",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="59a16a14f0d629fb7a8b539cbdd82c65d957518845ac0cdf57c2c582781aa3de",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_fft._SpectrumProduct._bound",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="7eab461da4ba271790f9bb8020b9d601ce47ef7132c440bd18b3546fcf5ecaf4",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_fft._SpectrumProduct.tilted_error",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="9de11ba539ce394c6691be4681436a56cb351d144775e2a167a5120f47f43026",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_fft._untilted",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="a41f9d2f3a8ecf326b482b33264ca98c74db4484ed76f86c21ee47e3fb36eab5",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_fft._tails",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="9e203ff16a7e7c8af175c46574235f8b86aac1cd914b29b2396ae85000744500",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_ratio.allocation_sum_pair",
        status="contrib",
        proof="proofs_checks/allocation_ratio/proof.md",
        source_sha256="658de5adff13c8d7b1d75edc3422f1dcd987fe137439f3d9302859bb2f6ec7b9",
    ),
    ProofRecord(
        target="dpledger.accountant.rdp_orders.bounded_range_rdp",
        status="verified",
        proof="proofs_checks/bounded_range/proof.md",
        source_sha256="79774d089ff4064c564071c6b9403c45404c7c6e8fb042e7841f31fa87a87901",
        cross_check="check_bounded_range.py::test_rdp_is_the_exact_supremum_rounded_up",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_noise.bounded_range_profile",
        status="verified",
        proof="proofs_checks/bounded_range/proof.md",
        source_sha256="ab31523a6ee622cc6a553325ebc9e87c9cf01bfda5f6865187ff4ccd152c36cf",
        cross_check="check_bounded_range.py::test_profile_is_the_supremum_over_two_point_pairs",
    ),
    ProofRecord(
        target="dpledger.accountant.representatives.split",
        status="contrib",
        proof="proofs_checks/representatives/proof.md",
        source_sha256="6ff908f754009f820f397a4d4ef1f7460a73e5c996bec6ce731e1600ef10850e",
    ),
    ProofRecord(
        target="dpledger.accountant.representatives.build",
        status="contrib",
        proof="proofs_checks/representatives/proof.md",
        source_sha256="850803666f1becd26271b59b6a1517b5f9c4b0137b3bd912569c189d084345bb",
    ),
    ProofRecord(
        target="dpledger.accountant.representatives._fold",
        status="contrib",
        proof="proofs_checks/representatives/proof.md",
        source_sha256="e0e23592a8231171713d4d7b219a295f82e94e17ec0240510f42f0f4f1cbab1d",
    ),
    ProofRecord(
        target="dpledger.accountant.representatives._beyond",
        status="contrib",
        proof="proofs_checks/representatives/proof.md",
        source_sha256="e1021db9f091dd1b1a67c504a9adcdf4dd73c415d7bc240e22ac618f8caff795",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_components.representative_components",
        status="contrib",
        proof="proofs_checks/representatives/proof.md",
        source_sha256="a18947a6d72c625eabaa13ba144362cfe800ad3a7196a0e17589719fa56462d5",
    ),
    ProofRecord(
        target="dpledger.accountant.rdp.RDPAccountant._grouped_others",
        status="contrib",
        proof="proofs_checks/representatives/proof.md",
        source_sha256="8761fd7fbf29129d4e5d932551412b1a3ae51e9a66c658b5640051b12dd5cdb8",
    ),
    ProofRecord(
        target="dpledger.accountant.gaussian_extreme.gaussian_epsilon_extreme",
        status="verified",
        proof="proofs_checks/gaussian/proof.md",
        source_sha256="65a4dc2fdc1f224c188d8f359dde4af5d606ea8f7595d2b397f12be85434823a",
        cross_check="check_gaussian_extreme.py::test_epsilon_bracket_contains_the_80_digit_value",
    ),
    ProofRecord(
        target="dpledger.accountant.gaussian_extreme.gaussian_delta_extreme",
        status="verified",
        proof="proofs_checks/gaussian/proof.md",
        source_sha256="bb75e78b50928db467d1b49a9cd85fcf7d407a32b643c30e644ac6638afa1269",
        cross_check="check_gaussian_extreme.py::test_epsilon_bracket_contains_the_80_digit_value",
    ),
    ProofRecord(
        target="dpledger.core.events.PartitionSelectionEvent",
        status="contrib",
        proof="proofs_checks/partition_selection/proof.md",
        source_sha256="caa204c79ddb0178676b7b4ca2693569cf4d7ff845c51ab2876144acd9ccf17f",
    ),
    ProofRecord(
        target="dpledger.core.partition_selection.key_budget",
        status="contrib",
        proof="proofs_checks/partition_selection/proof.md",
        source_sha256="de7a3f3085082d1c26548bb168efff8162857c426a2c787edf98fc929dda6666",
    ),
    ProofRecord(
        target="dpledger.core.partition_selection.selection_parameters",
        status="contrib",
        proof="proofs_checks/partition_selection/proof.md",
        source_sha256="bd69bcec9e3e3c309f2a1af23d170b61ab4e398210c9c89c6b2d14d704383354",
    ),
    ProofRecord(
        target="dpledger.core.partition_selection._geometric_table",
        status="contrib",
        proof="proofs_checks/partition_selection/proof.md",
        source_sha256="9736c140628fad7ae4746765a2323568040608c68be3253009887fa538868b86",
    ),
    ProofRecord(
        target="dpledger.core.partition_events.dominating_event",
        status="contrib",
        proof="proofs_checks/partition_selection/proof.md",
        source_sha256="94bbaa78404e853593d05e60cf53e1bd0241e9b81deb381760485890e56de1b5",
    ),
    ProofRecord(
        target="dpledger.core.event_trees.canonical",
        status="contrib",
        proof="proofs_checks/partition_selection/proof.md",
        source_sha256="fe38cfaff9769b1bf1392cafa6bb8c462059eeacded6b436da395d50ca0483f3",
    ),
    ProofRecord(
        target="dpledger.core.partition_selection.contribution_sensitivity",
        status="contrib",
        proof="proofs_checks/contribution_bounds/proof.md",
        source_sha256="82331e01eee469a6de1fc2dd4118e7fe9962e14c329408ce6672475e60ccc621",
    ),
    ProofRecord(
        target="dpledger.core.partition_events.partitioned_noise_event",
        status="contrib",
        proof="proofs_checks/contribution_bounds/proof.md",
        source_sha256="bd6a7f2d5c331162860230a7b062b3827c5b1c6852d7ce075ee39cc7e1e98e70",
    ),
)

#: proofs whose code objects are still changing: (proof folder, intended target, reason).
#: Each becomes a record (one ``--add`` command) once its source is stable.
PENDING: tuple[tuple[str, str, str], ...] = ()


#: proof folders about a paper's formula or proposition rather than a dpledger code object, and
#: why no record pins them (their checks call plugin functions read-only where these exist)
PAPER_CLAIMS: dict[str, str] = {
    "gdp_clt": "a paper's asymptotic formula (trajectories paper, Lemma 3.1); no dpledger "
    "accountant implements it, and none may",
    "private_mean": "a paper's proposition (trajectories paper, Prop. 4.1); its calibration is "
    "the record dpledger.accountant.calibrate.calibrate_noise_multiplier",
    "time_subsampling_gap": "a utility lemma (trajectories paper, Prop. 4.2); no privacy code",
    "sliced_wasserstein_sensitivity": "a paper's lemma (sliced-Wasserstein paper, Lemma 1); the "
    "flow plugin's bounds (dpledger.plugins.swflow.sensitivity) are still changing and are "
    "checked read-only",
    "sliced_wasserstein_privacy": "a paper's theorem (sliced-Wasserstein paper, Theorem 3), "
    "recomputed from the paper's formulas",
    "shk_stability": "a paper's theorem (SHK paper, Theorem 1) checked against the SHK plugin's "
    "solver, whose source is still changing",
    "shk_pure_dp": "a paper's theorem (SHK paper, Theorem 3) checked against the SHK plugin's "
    "bounds, whose source is still changing",
    "published_claims": "recomputes the four papers' published epsilons; the script lives in "
    "experiments/published_claims",
}

#: proof folders with no record of their own (kept for callers of the former name)
NO_CODE_OBJECT: tuple[str, ...] = tuple(PAPER_CLAIMS)


def records_for(target: str, records: Sequence[ProofRecord] = RECORDS) -> list[ProofRecord]:
    return [r for r in records if r.target == target]


def tier_of(target: str, records: Sequence[ProofRecord] = RECORDS) -> str:
    """Trust tier of a code object: its record's status, or 'unverified' if none or stale."""
    found = records_for(target, records)
    if not found:
        return "unverified"
    try:
        current = source_hash(target)
    except (InvalidParameterError, OSError, TypeError):
        return "unverified"
    fresh = [r.status for r in found if r.source_sha256 == current]
    if not fresh:
        return "unverified"
    return min(fresh, key=STATUSES.index)


# -- maintenance CLI (dpledger.proofs_checks.registry_cli) -----------------------------------
#: the maintenance functions, loaded when first used
_CLI = frozenset({"add_record", "main", "update_hash"})


def __getattr__(name: str) -> Any:
    """:func:`add_record`, :func:`update_hash` and :func:`main`, from the maintenance module."""
    if name in _CLI:
        return getattr(importlib.import_module("dpledger.proofs_checks.registry_cli"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    raise SystemExit(importlib.import_module("dpledger.proofs_checks.registry_cli").main())

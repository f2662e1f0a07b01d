"""The proof records of the exponential mechanism's composition (data of
:mod:`dpledger.proofs_checks.registry`, appended to its records). ``python -m
dpledger.proofs_checks.registry --update TARGET`` refreshes a hash here too; a new record of
these proofs is added here by hand, in the same form."""

from __future__ import annotations

from dpledger.proofs_checks.proof_record import ProofRecord

__all__ = ["EXP_MECH_RECORDS"]

EXP_MECH_RECORDS: tuple[ProofRecord, ...] = (
    ProofRecord(
        target="dpledger.accountant.exp_mech_composition.br_delta_bracket",
        status="verified",
        proof="proofs_checks/exp_mech_composition/proof.md",
        source_sha256="5b12cd8030eea0ed88bf5d10acfac1ce73de13c03b97507bf9303d31056d1089",
        cross_check="check_exp_mech_composition.py::test_single_release_bracket_contains_the_exact_curve",
    ),
    ProofRecord(
        target="dpledger.accountant.exp_mech_composition.br_composed_epsilon_lower",
        status="verified",
        proof="proofs_checks/exp_mech_composition/proof.md",
        source_sha256="e0f26e5cdfb2c4b7255771b6e345feb3a5d184926fdfe78f666b50a515cc399a",
        cross_check="check_exp_mech_composition.py::test_epsilon_lower_is_the_maximum_over_t_at_40_digits",
    ),
    ProofRecord(
        target="dpledger.accountant.exp_mech_composition.br_composed_delta_lower",
        status="verified",
        proof="proofs_checks/exp_mech_composition/proof.md",
        source_sha256="5f101a7af82c2a81d124dcb6a069f9a82a13e6db0d1f9466b59e378bf7106060",
        cross_check="check_exp_mech_composition.py::test_delta_lower_is_the_maximum_over_t_at_40_digits",
    ),
    ProofRecord(
        target="dpledger.accountant.exp_mech_composition._cumulative",
        status="verified",
        proof="proofs_checks/exp_mech_composition/proof.md",
        source_sha256="e6bb75b46f9e7c717c16e292e555041227325d087ca9a40f0e115dea5ef82acd",
        cross_check="check_exp_mech_composition.py::test_every_t_gives_a_certified_lower_bound",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive.adaptive_br_curves",
        status="verified",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="13319d9bbb2421d6db760da74d035a991784db598813e319f05c16f26cc79b1e",
        cross_check="check_br_adaptive.py::test_one_release_lattice_bracket_contains_the_exact_curve",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive._step_lower",
        status="contrib",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="eb50586118b76cfe86dc888f57aa0d22eef6e387475bc74269c8f1e1b40006b3",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive._step_upper",
        status="contrib",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="6696cd0ff6c56a3c1d64787646abb050be557a494722116e925f2e5617a0c15b",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive._mirror",
        status="contrib",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="e99886c753c3df43990fe07c3d58d1a99abd979808685faf7e1eec17a70743ac",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive._masses",
        status="contrib",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="99b9318dc525619d01949a0baa2216cd9ee8f6a3ad0dbe1d57a3f26742577ecb",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive.adaptive_br_epsilon",
        status="verified",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="dbe579617eaad184ea9644057373b04c9a6060c3ba299d6e9e761125acd56742",
        cross_check="check_br_adaptive.py::test_upper_is_above_the_non_adaptive_optimum",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive.adaptive_br_delta",
        status="verified",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="dc515a31f8351c669d5eb34eb7501110a5b2e775de9665110f32d0aebac69a1f",
        cross_check="check_br_adaptive.py::test_two_releases_bracket_the_30_digit_optimum",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive._epsilon_upper",
        status="contrib",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="186372596acedb568def75d5a20eda25aac5a387d0d3222cf46d9d014be02474",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive._epsilon_lower",
        status="contrib",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="9f0656b0f7c8e3266d1c0343b8d785e199ee6531ca6efa706fb3dc45b5aba6d7",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive._delta_upper",
        status="contrib",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="dd65c7b6593f37574308dc7c5ba54714e0fcf5f279db97b09f3845bcdf52eb46",
    ),
    ProofRecord(
        target="dpledger.accountant.br_adaptive._delta_lower",
        status="contrib",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="0975ba784c47c5ee0e5c99b49804c80cc78cf82c52dbc41b75c25067a282b7d9",
    ),
    ProofRecord(
        target="dpledger.accountant.closed_form._adaptive_releases",
        status="contrib",
        proof="proofs_checks/br_adaptive/proof.md",
        source_sha256="3c628b3660ece3e655dcd4699d023850efe3344bfc7056c95eba222d9743174f",
    ),
)

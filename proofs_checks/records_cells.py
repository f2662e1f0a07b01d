"""The proof records of the exact blocks of equal epsilon-type leaves
(:mod:`dpledger.accountant.epsilon_cells`) and of the cells of many random allocations
(:mod:`dpledger.accountant.allocation_cells`) and of the cells of many tabulated profiles
(:mod:`dpledger.accountant.tabulated_cells`); data of :mod:`dpledger.proofs_checks.registry`,
appended to its records. ``python -m dpledger.proofs_checks.registry --update TARGET``
refreshes a hash here too; a new record of this proof is added here by hand, in the same form."""

from __future__ import annotations

from dpledger.proofs_checks.proof_record import ProofRecord

__all__ = ["ALLOCATION_CELL_RECORDS", "EPSILON_CELL_RECORDS", "TABULATED_CELL_RECORDS"]

EPSILON_CELL_RECORDS: tuple[ProofRecord, ...] = (
    ProofRecord(
        target="dpledger.accountant.epsilon_cells.block_masses",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="a3a801a5321a86d8163424ddca0df9df1d59078e474b15c28a1236d44daff8fb",
    ),
    ProofRecord(
        target="dpledger.accountant.epsilon_cells.cell_profiles",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="f32327360947ac5582489d170263d2494d67fb8abccd71606cac079a419ef466",
    ),
    ProofRecord(
        target="dpledger.accountant.epsilon_cells._upper",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="cd32b7d52ef67da896f9b82e4b9640893a3dcf8f3c7cfd62dfee9dc6044ea680",
    ),
    ProofRecord(
        target="dpledger.accountant.epsilon_cells._lower",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="2608e868d9e64745fa401e815b735a8bbdff605c1f287b80c75d8ff556b766a6",
    ),
    ProofRecord(
        target="dpledger.accountant.epsilon_cells._lower_atoms",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="6941ebf9aa5cefa398a662ffa70ec411322d496657645cb5c24d9d956e14c6af",
    ),
    ProofRecord(
        target="dpledger.accountant.epsilon_cells._single",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="3e83a130131d22239286240174804523671af3dc63c6d0dc13103e4793c6636f",
    ),
    ProofRecord(
        target="dpledger.accountant.epsilon_cells._merged",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="4ff4ea439999a5bd26e24ad103cdc63af581bb5b78c82dab088aa536417e9950",
    ),
    ProofRecord(
        target="dpledger.accountant.epsilon_cells._Evaluator",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="d164d52fe18a3283ce74c74afe2a7e042aa97e68007634bce6a485436be72179",
    ),
    ProofRecord(
        target="dpledger.accountant.epsilon_cells._leaf_masses",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="8bc1b02e1ae0c865e636c4700292bbb88489c70d5ca5de1a5238b14d504ad04a",
    ),
)

#: the cells of many distinct random allocations (:mod:`dpledger.accountant.allocation_cells`)
ALLOCATION_CELL_RECORDS: tuple[ProofRecord, ...] = (
    ProofRecord(
        target="dpledger.accountant.allocation_cells.allocation_cells",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="16cb8cd932c45c993655af33f93a7c6380294f2bcc8e87f89826a04eb5a8592b",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_cells._grouped",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="02ad413c173f049ecb6018e1ea590d577fe73bca76f04c8aff33246e4dd2bcf1",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_cells._representative",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="85ef4f033e12257f67184df3e3ed7fecba93f6719dfd5a5c95118539b72dede2",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_cells._lower_members",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="f68fd09fa92d11445b176d788acc69db879ef6a2627e20d6c42a9f894603b644",
    ),
    ProofRecord(
        target="dpledger.accountant.random_allocation.allocation_side_profiles",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="57093378b53f3ea92b6bfce16464c7061d2d4135f831ac67e7c9bd253694561f",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_cells._params",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="d2a2297fc2f14965bf4337ecd51b0a0855b31d8e73a05d728e93a123ba444ff7",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_cells._cells",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="c20fe5c0b61beaa416167f97eef20bbe380f4577b3c44ec7f356754f6c091eca",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_cells.shuffled_cells",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="ce4d650a28394b3db8a13c1b696bc7eb36375d3239895faa3c688338452b307d",
    ),
)

TABULATED_CELL_RECORDS: tuple[ProofRecord, ...] = (
    ProofRecord(
        target="dpledger.accountant.tabulated_cells.grouped_tabulated",
        status="contrib",
        proof="proofs_checks/tabulated_cells/proof.md",
        source_sha256="073e8990a8ef6e2a2f757de3fac55c603c475062a1da2fcb9ca1bdb30f00fe6a",
    ),
    ProofRecord(
        target="dpledger.accountant.tabulated_cells.upper_table",
        status="contrib",
        proof="proofs_checks/tabulated_cells/proof.md",
        source_sha256="3e749cfbd09654c56d8ba9d05b1370971682a65ac17fc35395b31dcdf62e2405",
    ),
    ProofRecord(
        target="dpledger.accountant.tabulated_cells.lower_profiles",
        status="contrib",
        proof="proofs_checks/tabulated_cells/proof.md",
        source_sha256="b154867660b7aba09dacc14c9b567590973a3fb161c439fac62e7a0e30d9a980",
    ),
    ProofRecord(
        target="dpledger.accountant.tabulated_cells._table_error",
        status="contrib",
        proof="proofs_checks/tabulated_cells/proof.md",
        source_sha256="2ddc6c61dad341470b04b650f093be172bfb7280ef01a553e2da9063e0f00316",
    ),
    ProofRecord(
        target="dpledger.accountant.tabulated_cells._minorant",
        status="contrib",
        proof="proofs_checks/tabulated_cells/proof.md",
        source_sha256="f95088f5a45c76b31344d012499258d601197a342b42c7a0bb029f8704b15e41",
    ),
    ProofRecord(
        target="dpledger.accountant.tabulated_cells._lowered_corners",
        status="contrib",
        proof="proofs_checks/tabulated_cells/proof.md",
        source_sha256="3b5ef0338ca32684c5a7ac061e03e6097b5483613c9a3266210ebd0b1df405a9",
    ),
    ProofRecord(
        target="dpledger.accountant.tabulated_cells._chord_error",
        status="contrib",
        proof="proofs_checks/tabulated_cells/proof.md",
        source_sha256="9fdb188ca079c79b0cecb5acf27d9b542d7829b45228d409435f7766e33e235d",
    ),
    ProofRecord(
        target="dpledger.accountant.tabulated_cells._chord_curve",
        status="contrib",
        proof="proofs_checks/tabulated_cells/proof.md",
        source_sha256="6bebf6ed5a248ea7f0219a29f8e25a56421a32d68b991b2756367437f8a78f7a",
    ),
)

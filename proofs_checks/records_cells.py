"""The proof records of the exact blocks of equal epsilon-type leaves
(:mod:`dpledger.accountant.epsilon_cells`) and of the cells of many random allocations
(:mod:`dpledger.accountant.allocation_cells`); data of :mod:`dpledger.proofs_checks.registry`,
appended to its records. ``python -m dpledger.proofs_checks.registry --update TARGET``
refreshes a hash here too; a new record of this proof is added here by hand, in the same form."""

from __future__ import annotations

from dpledger.proofs_checks.proof_record import ProofRecord

__all__ = ["ALLOCATION_CELL_RECORDS", "EPSILON_CELL_RECORDS"]

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
        source_sha256="d1f9903c6d8ac59ed45b675cf69e64e7bb41b925c909f0de02ba7df0ef019bb5",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_cells._grouped",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="2b2d0e08f77c3aea09454a34aec24bcb63d9a3dd7b3c44a1a4b46e1b7ac6f92f",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_cells._representative",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="f6e267da2996a9e094d49a319f97d3848f793f3b617a749a124baa708bff6f9c",
    ),
    ProofRecord(
        target="dpledger.accountant.allocation_cells._lower_members",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="c90c300e64dc6e3f8ab8f6796cd79fd4ec92cef32b998eb434a1647ca58ce50c",
    ),
    ProofRecord(
        target="dpledger.accountant.random_allocation.allocation_side_profiles",
        status="contrib",
        proof="proofs_checks/allocation_cells/proof.md",
        source_sha256="57093378b53f3ea92b6bfce16464c7061d2d4135f831ac67e7c9bd253694561f",
    ),
)

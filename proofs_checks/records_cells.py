"""The proof records of the exact blocks of equal epsilon-type leaves
(:mod:`dpledger.accountant.epsilon_cells`; data of :mod:`dpledger.proofs_checks.registry`,
appended to its records). ``python -m dpledger.proofs_checks.registry --update TARGET``
refreshes a hash here too; a new record of this proof is added here by hand, in the same form."""

from __future__ import annotations

from dpledger.proofs_checks.proof_record import ProofRecord

__all__ = ["EPSILON_CELL_RECORDS"]

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
        source_sha256="8466a57bdfb854f029fa1305e1f49b940fa25293862871747fc149f4a4ea5ae3",
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
        source_sha256="4f4eb8fdb3dc7c73d2c61c95a8451f8aa16be6102dd7c0634212e956b2a37964",
    ),
    ProofRecord(
        target="dpledger.accountant.epsilon_cells._leaf_masses",
        status="contrib",
        proof="proofs_checks/epsilon_cells/proof.md",
        source_sha256="8bc1b02e1ae0c865e636c4700292bbb88489c70d5ca5de1a5238b14d504ad04a",
    ),
)

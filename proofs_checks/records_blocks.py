"""The proof records of the blocks of distinct Laplace leaves on fine grids
(:mod:`dpledger.accountant.pld_blocks`; data of :mod:`dpledger.proofs_checks.registry`,
appended to its records). ``python -m dpledger.proofs_checks.registry --update TARGET``
refreshes a hash here too; a new record of this proof is added here by hand, in the same form."""

from __future__ import annotations

from dpledger.proofs_checks.proof_record import ProofRecord

__all__ = ["PLD_BLOCK_RECORDS"]

PLD_BLOCK_RECORDS: tuple[ProofRecord, ...] = (
    ProofRecord(
        target="dpledger.accountant.pld_blocks.compose_masses",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="077285072a1b52551f8c923890ea623a3aeeac1062bedb0f4261aa5e9e7447f4",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._Atoms",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="bcc8823f9678b7100fc690b8c8cf159d7850712cd3af1d49be51bd75c2565fc1",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._suffix",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="fa242b6f143f4fc0fc00751216f0bd9a41a1956d9811261f594596dc646c2355",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._upper_profile",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="f6911aaa4986e6e4edecafb005266b983928ea263533b14798d36d5611c250b5",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._lower_profile",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="2179e536a69c8dfdf9276e40dae1b4954c39c005ce678839f9d2005f7dc2cb3f",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks.block_profiles",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="bf4b279d1d785d014199f7959c4746919f432050924bd8be12772e3d68d8017a",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._rounded",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="3430dbf14f50fb2f72ebcb94f6583a892d6367eb8b0f3af8e3e888be10ed7294",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._blocks",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="ddc996ff3e7e32b9a686719c1bbcf7a4a5ee0fe97a1c7cee892b1164a2b1dfca",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._grouped",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="61ca5c8c46af3f3e047de2666808407e0a3e413ad80a3a53fea600fa17eff86b",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks.block_components",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="57f7787deaeab483b6414e3df06b2820153c79e24699d8bba1751bf5b07e25ec",
    ),
)

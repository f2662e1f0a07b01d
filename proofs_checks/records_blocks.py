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
        source_sha256="d35dd96e6910047795eb357f67e8c05a28f465f0d72502b934ae99cfcc22efec",
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
        source_sha256="68f0ae5e55e73f38510eda4c25667b654c8b07e255ca2d8515bb4b77736dd3b6",
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
        source_sha256="3a4f40089eed23875184e4e71988d3d3d99ab47a9bc1269b9428a077161b14b6",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._grouped",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="9e1d28434e717a202d11c66710d94e6ac0ea921bc8832d8f9ea62994f927be6f",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks.block_components",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="cbed22653029c376c2a87a6612ad0e6534f00cb009ff70b3e9654d27080e8fe3",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._convolved",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="ad933f50537abda724eb2ab0c6bbbcd49804e7433da97decbd8d4667556f8c16",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._least_positive",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="8c0ff3bcc8140d129ebdf12f17632f9c46828be9b5c221d3a2ad116a05df801b",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._checked",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="cd4ce744c67cb92ac2ffbeb43c73d4e9f446bf157bfd33b31f0e0532c49bd593",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._finished",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="a4bf5a83e3b5373d5a4d368236b1510487500fedad99fce2a0a783d687dcd4c9",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._Parts",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="d67212f9eb411224b319ef488b99bfa165acfc7d1c1706f7ddf1db0080cc48ef",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._walk",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="44a318305f834dc44583c6d1a7ef3d098360223eecce4d99e03b1f38c1ab231f",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._cell_blocks",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="001c3b8113b020100365cfcc2480b5fd2349779ed81bf60159bf2ace628abea5",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._made",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="567cc5c5dd70ee48ea4d2f53fc15f05ac20051e27a56c91424e1f0dc0b75f740",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_blocks._grouping",
        status="contrib",
        proof="proofs_checks/pld_blocks/proof.md",
        source_sha256="564a92db92ed0598287a121ed5f2032a1d616cabaedd522134df055443f7d17d",
    ),
)

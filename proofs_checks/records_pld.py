"""The proof records of the PLD dominated pair's helpers and of the lower reading's charges
(data of :mod:`dpledger.proofs_checks.registry`, appended to its records): the rules of
``discretise_lower`` live in these functions, so a change to any of them makes the pair's
proof stale; what a lower reading of a composition subtracts (``pld_read``) rests on that
pair and on the tilted FFT's brackets (proofs_checks/pld_tilted_fft, "Reading lower bounds");
components cut at their far tails (``pld_prepared``) rest on both discretisations
(proofs_checks/pld_cut_tails); the approximate-DP curve names the split at +infinity its
dominated pair keeps (proofs_checks/approx_dp_split), and its Poisson-sampled remove curve the
P-only mass its dominated pair keeps (proofs_checks/poisson_subsampling).
``python -m dpledger.proofs_checks.registry --update TARGET`` refreshes a hash
here too; a new record of this proof is added here by hand, in the same form."""

from __future__ import annotations

from dpledger.proofs_checks.proof_record import ProofRecord

__all__ = ["PLD_DOMINATED_RECORDS"]

PLD_DOMINATED_RECORDS: tuple[ProofRecord, ...] = (
    ProofRecord(
        target="dpledger.accountant.pld_dominated._segment_limits",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="4e851c335f3d18e61e70d7d8eefca6a19da977824508148c01e2dec34fc1a568",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._mid_limits",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="da6b9b2a09a0116533da97d2ed3b5be94642a0b3f67dc24818f9afee1c53ff4c",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._points_below",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="b47eef2034e7d61c6f32196eb29f872712d02a15469f65dc894f94df5540eb7f",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._minorant_masses",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="5d5b236a7426bd6ac3c3eedcd9750a5cba4dda8e46a44379ddacd3459e0378e9",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._certified_lower",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="6d00a7ccc97b795abe763c651f716457906234f9ebbe5c26c75122b8eb84e72f",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._add_completion",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="8fdc02f2fa24e3bd5b4e893258ca8368f4d04c5146d9733b0706802a3d12ea29",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_read.excess_mass",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="ad54f961fd0ffd22f7f9fce04160230f4e1454f57f9a909666ddc00f244ecb8c",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_read._lower_extra",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="1d9f83e9ce1186e3ce7b488a2e1fa808bb636261fe98ee76e8ea71c5f5b825bf",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_read.wrap_above",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="8e2c3e1edcf36cd3b3ac3a1d0526e7382224006c5df2ed906bc853a3e3bd07b6",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_read.infinity_lower",
        status="contrib",
        proof="proofs_checks/pld_tilted_fft/proof.md",
        source_sha256="b0d63c185c52b0f522b260b9e8c6cbb77b92a9b310204ab068d3c8d4439c3298",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._dominated",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="915f7701482ae0773f0528b44925627141c9cf735e7d2a4414ccc06fe17c1977",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._mass_sums",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="2d6f648d4cba1a4625ed5419c51b9e78f77006f23ab1ab2c97f29bf58b7347e0",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._totals",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="106cad866f0a02cd01f9ace497ef117172129e8ea61017e8d3ddebe6bcb7cfc2",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._atom_lower",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="9a4574a897b5319b199d24d948ff500a0c12a3784f728a1609ce65d40c830e2a",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._atom_brackets",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="96767ef2169144bcb9aae639a17ad87e5f9cdd0993dcb30b7b91cf49f8694e1a",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._atom_totals",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="7e25729382e4bb461d47dc494dace507b0783b626111201a9ab0fc53ac68b34d",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._lifted_completion",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="4842af68a5e056f610af40fd45f092ee8639b3406bb4bea87187243a33072700",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_sampled._poisson_remove",
        status="contrib",
        proof="proofs_checks/poisson_subsampling/proof.md",
        source_sha256="b40b1e39425f7451bad75dce7938e0f7248e4a421acdc33db05148c56b4bf6ba",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_sampled._remove_atom",
        status="contrib",
        proof="proofs_checks/poisson_subsampling/proof.md",
        source_sha256="bcb420032a93c3b8408985e52fffbdb8aa8e47bee12a0bf188fb228d7214428d",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._split_lower",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="68c400ff6f1a6945ef2b60c07f886adfa28124d04a655a8de601bce4f33e966e",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_prepared._cut_profile",
        status="contrib",
        proof="proofs_checks/pld_cut_tails/proof.md",
        source_sha256="4245e1a9d93437fe4544430c9c66fec16dcf9b09468966380573785eee1de854",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_prepared.cut_tails",
        status="contrib",
        proof="proofs_checks/pld_cut_tails/proof.md",
        source_sha256="6afa68d8f58ac8ed4503f6b44bcbe792ea0b004d80906d080bfb1e77ba8f4480",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_noise.approx_dp_profile",
        status="contrib",
        proof="proofs_checks/approx_dp_split/proof.md",
        source_sha256="11ad517cdc69058bb46ab0ba38f1fc9c1b0180c0e9d16634abf377b388bf67cc",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_leaf_check.shapes_in_range",
        status="contrib",
        proof="proofs_checks/pld_fast_paths/proof.md",
        source_sha256="c2581ef829a8f0e246d1d8da14dcda91f1c431f96f100defc147a740c9156e78",
    ),
    ProofRecord(
        target="dpledger.accountant.base.Accountant._checked_reason",
        status="contrib",
        proof="proofs_checks/pld_fast_paths/proof.md",
        source_sha256="f4041784387f49ae25ebc9028cb523d6943055a8bb658fb45cd1a43d92d5a4f4",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_prepared.ByCurve",
        status="contrib",
        proof="proofs_checks/pld_fast_paths/proof.md",
        source_sha256="999a18a1d365a370e6f592dd40efc71a66ce2e3496dabfda2f2c2e4226dc21fe",
    ),
)

"""The proof records of the PLD dominated pair's helpers and of the lower reading's charges
(data of :mod:`dpledger.proofs_checks.registry`, appended to its records): the rules of
``discretise_lower`` live in these functions, so a change to any of them makes the pair's
proof stale; what a lower reading of a composition subtracts (``pld_read``) rests on that
pair and on the tilted FFT's brackets (proofs_checks/pld_tilted_fft, "Reading lower bounds");
components cut at their far tails (``pld_prepared``) rest on both discretisations
(proofs_checks/pld_cut_tails); the approximate-DP curve names the split at +infinity its
dominated pair keeps (proofs_checks/approx_dp_split).
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
        source_sha256="373c0b25cba170431e4bef384147fb5da6e2d2c1126f0db80a9c77a911208dcb",
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
        source_sha256="2617f939d3602cd1379e3322bd7856cb24bf6162e0540348bf07ec9e043ab420",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._minorant_masses",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="4e4c9ba81cea8157dae0ceb380b9375aa771a658737b560f23309b1e4fa9582e",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._certified_lower",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="caf7dfea123260efc4e0efba24517757d89c5b3e02e04113108492d379ac9007",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_dominated._add_completion",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="e3918e92fc23b236d47e82ed4e5f1df98a7bb245f27477c903fed4a1e016ba33",
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
        source_sha256="81081d7a324d1ae9a7338a66229d3de2e4213135a7f60eb5f8fe17c2322dda07",
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
        target="dpledger.accountant.pld_dominated._split_lower",
        status="contrib",
        proof="proofs_checks/pld_dominated_pair/proof.md",
        source_sha256="94eb43d0cd2e668a8793c18683c22f255c6e735f200dbeb83a7243f548994d3a",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_prepared._cut_profile",
        status="contrib",
        proof="proofs_checks/pld_cut_tails/proof.md",
        source_sha256="4ed116ab1bb93fd99c8badc116ed2d9c6f451eb96faa5e3785d0f33487b3e99b",
    ),
    ProofRecord(
        target="dpledger.accountant.pld_prepared.cut_tails",
        status="contrib",
        proof="proofs_checks/pld_cut_tails/proof.md",
        source_sha256="5379c373d94430ec0b67bbad6fe714932fd6097cacb52b7c85518ae0e518b68d",
    ),
    ProofRecord(
        target="dpledger.accountant.profiles_noise.approx_dp_profile",
        status="contrib",
        proof="proofs_checks/approx_dp_split/proof.md",
        source_sha256="14aa4a4e6e6d0ec18176f997a8105badcb45c148e5bf3d6cc5293b0228050fca",
    ),
)

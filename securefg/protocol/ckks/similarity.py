"""``similarity`` under CKKS: encrypted pairwise inner products, decrypted as bare scalars.

Flow (cefgc.md §6.1 item 10) and exactly who learns what (semi-honest, no collusion of the
server with the key holder):

1. Key setup: the server gets the public context *with Galois keys* (rotations); the key holder
   keeps the secret key; clients get the public context.
2. Client k uploads ``Enc(c * x_k / ||x_k||)`` for ``cosine`` (``Enc(x_k)`` for ``dot``), where
   ``c = 2**((headroom - 4) // 2)`` (256 at N=8192) is a public constant that lifts the products
   far above the additive rotation noise (error ~3e-11 instead of ~2e-6 on a cosine).
   The server learns sizes only.
   Vectors of at most N/2 values are encrypted *windowed* (one chunk of the next power of two
   slots), so the server's rotate-and-sum takes ``log2`` of that many rotations, not of N/2.
3. The server computes, for every unordered pair {a, b} (diagonal included), ``Enc(<u_a, u_b>)``:
   a ciphertext product, a rotate-and-sum over the window (slot 0 holds the whole sum, the
   others partial window sums) and a one-hot mask that zeroes every slot but the first.
   It shuffles the pair order with a CSPRNG permutation and sends the ciphertexts to the key holder.
4. The key holder decrypts N(N+1)/2 scalars, divides by c^2, floods them
   (:mod:`~securefg.protocol.ckks.output_noise`) and returns them (``Form.AGGREGATE``).
5. The server un-permutes them into the similarity matrix.

Learned: the **server** learns the similarity matrix (the exchange's output) + flooding noise;
the **key holder** learns the *multiset* of similarity values but not which pair each belongs to
(beyond what the values themselves reveal, e.g. the cosine diagonal is 1); **clients** learn
nothing. Not hidden: the masked-out slots of each decrypted ciphertext hold CKKS noise only, but
CKKS has no circuit privacy, so that noise is a (weak) function of the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from securefg.errors import CodecError, InvalidInputError, OverflowRiskError
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.ckks.output_noise import OutputNoise
from securefg.protocol.ckks.presets import CKKSPreset
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.ckks.upload import upload_encrypted
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.shuffle import secure_permutation

METRICS = ("cosine", "dot")


def cosine_lift(preset: CKKSPreset) -> float:
    """The public factor ``c`` clients multiply unit vectors by (so c^2 fits the headroom)."""
    return float(2 ** ((preset.headroom_bits - 4) // 2))


def prepare_input(x: torch.Tensor, metric: str, preset: CKKSPreset, pid: str) -> torch.Tensor:
    """Client-side: what client ``pid`` encrypts."""
    if metric == "cosine":
        norm = float(x.norm())
        unit = x / norm if norm > 0 else torch.zeros_like(x)
        return unit * cosine_lift(preset)
    bound = 2.0 ** (preset.headroom_bits - 2)
    if float(x @ x) > bound:
        raise OverflowRiskError(
            f"{pid}: squared norm {float(x @ x):.3g} exceeds {bound:.3g}, the largest dot product CKKS "
            f"preset {preset.name!r} decrypts correctly; use metric='cosine' or scale the vectors down"
        )
    return x


def check_metric(metric: str) -> None:
    """Raise :class:`InvalidInputError` for a metric other than :data:`METRICS`."""
    if metric not in METRICS:
        raise InvalidInputError(f"unknown similarity metric {metric!r}; choices: {list(METRICS)}")


def lift_squared(metric: str, preset: CKKSPreset) -> float:
    """What the key holder divides decrypted products by (``c^2`` for cosine, 1 for dot)."""
    return cosine_lift(preset) ** 2 if metric == "cosine" else 1.0


def pair_products(
    uploads: Mapping[str, EncryptedVector], senders: list[str]
) -> tuple[list[tuple[str, str]], list[int], bytes]:
    """Server-side: every unordered pair's masked product, in a CSPRNG order, as one payload.

    Returns:
        (the pairs, the permutation, the packed ciphertexts in permuted order).
    """
    pairs = [(a, b) for i, a in enumerate(senders) for b in senders[i:]]
    perm = secure_permutation(len(pairs))
    request = [uploads[pairs[k][0]].dot(uploads[pairs[k][1]]).to_bytes() for k in perm]
    return pairs, perm, pack_blobs(request)


def release_products(
    secret: SecretContext, payload: bytes, *, count: int, lift2: float, noise: OutputNoise
) -> bytes:
    """Key holder: decrypt the permuted scalars, undo the public lift, flood, encode.

    Raises:
        CodecError: the request does not hold exactly ``count`` encrypted scalars.
    """
    blobs = unpack_blobs(payload, max_count=count)
    if len(blobs) != count:  # an empty list also made torch.cat raise a bare ValueError
        raise CodecError(f"similarity request holds {len(blobs)} encrypted products, expected {count}")
    decrypted = [secret.decrypt(secret.load(b, expected_length=1)) for b in blobs]
    values = (torch.cat(decrypted) if decrypted else torch.zeros(0, dtype=torch.float64)) / lift2
    return encode_tensor(noise(values))


def unpermute(pairs: list[tuple[str, str]], perm: list[int], payload: bytes) -> dict[tuple[str, str], float]:
    """Server-side: the released values back on their pairs (both orders)."""
    got = decode_tensor(payload, spec=TensorSpec({"x": (torch.float64, (len(pairs),))}))
    out: dict[tuple[str, str], float] = {}
    for pos, k in enumerate(perm):
        a, b = pairs[k]
        v = float(got[pos])
        if not math.isfinite(v):
            raise InvalidInputError(f"similarity of {a}, {b} is not finite")
        out[(a, b)] = out[(b, a)] = v
    return out


def encrypted_similarity(
    call: ExchangeCall,
    keys: CKKSKeySetup,
    inputs: Mapping[str, torch.Tensor],
    metric: str,
    noise: OutputNoise,
) -> dict[tuple[str, str], float]:
    """Run the five steps above; returns the server's similarity for every ordered pair."""
    check_metric(metric)
    preset = keys.preset
    preset.require_levels(2, what="encrypted similarity (ciphertext product, then a mask)")
    senders = sorted(p for p in inputs if p not in call.transport.offline)
    holder = keys.ensure(call, encryptors=senders, decryptors=(), galois=True)

    prepared = {p: prepare_input(inputs[p], metric, preset, p) for p in senders}  # each as its owner
    uploads = dict(upload_encrypted(call, keys, prepared, window=True))

    # --- server: all pairwise products, masked, in a secret random order
    pairs, perm, request = pair_products(uploads, senders)
    call.transport.send(
        Envelope(
            call.server, (holder,), call.round, call.tag, request,
            stage=Stage.SIMILARITY_REQUEST, form=Form.CIPHERTEXT,
        )
    )

    # --- key holder: decrypt scalars, undo the public lift, flood, release
    (req,) = call.transport.receive_from(
        holder, [call.server], tag=call.tag, round=call.round, stage=Stage.SIMILARITY_REQUEST
    ).values()
    released = release_products(keys.secret_of(call, holder), req.payload, count=len(pairs),
                                lift2=lift_squared(metric, preset), noise=noise)
    call.transport.send(
        req.reply(released, sender=holder, stage=Stage.SIMILARITY_RESULT, form=Form.AGGREGATE)
    )

    # --- server: un-permute into the matrix
    (res,) = call.transport.receive_from(
        call.server, [holder], tag=call.tag, round=call.round, stage=Stage.SIMILARITY_RESULT
    ).values()
    return unpermute(pairs, perm, res.payload)

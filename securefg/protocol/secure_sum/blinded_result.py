"""The blinded sum ``blind_sum``'s server sends to every client, and how a client unblinds it.

Wire format (length-prefixed fields, :func:`~securefg.federation.channel.length_prefixed`):
``u32 client count n || u32 ring bits || u32 length || survivor ids ("\\n"-joined) || packed ring
vector``. The vector is :math:`\\sum_{u \\in U} (q(x_u) + \\mathrm{PRG}(g_u)) \\bmod 2^{bits}`
over the survivors :math:`U`: the server removed every SecAgg+ mask but cannot remove the
blindings :math:`g_u`, which only the group key's holders derive
(:func:`~securefg.protocol.secure_sum.group_key.blinding_seed`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from securefg.errors import CodecError, InvalidClaimError
from securefg.federation.channel import length_prefixed, split_length_prefixed
from securefg.protocol.secure_sum.constants import AbortReason
from securefg.protocol.secure_sum.group_key import blinding_seed
from securefg.protocol.secure_sum.packing import decode_packed, encode_packed
from securefg.protocol.secure_sum.prg import MAX_RING_BITS, MaskExpander, ring_dtype, ring_mask
from securefg.protocol.secure_sum.range_check import check_sum
from securefg.protocol.secure_sum.settings import Settings

_HEADER = struct.Struct("<III")


@dataclass(frozen=True)
class BlindedResult:
    """A blinded ring sum and whose inputs (and blindings) it holds."""

    clients: int
    bits: int
    survivors: tuple[str, ...]
    ring_sum: np.ndarray

    def encode(self) -> bytes:
        words = (self.ring_sum & self.ring_sum.dtype.type(ring_mask(self.bits))).astype(ring_dtype(self.bits))
        return length_prefixed(_HEADER.pack(self.clients, self.bits, words.size), "\n".join(self.survivors).encode(),
                               encode_packed(words, self.bits))

    @classmethod
    def decode(cls, data: bytes) -> BlindedResult:
        """Parse a blinded result (lengths and sizes checked, no pickle).

        Raises:
            CodecError: truncated, trailing bytes, a ring outside 2^1 .. 2^64, or a vector of
                the wrong size.
        """
        (head, ids, packed), end = split_length_prefixed(data, 3)
        if end != len(data) or len(head) != _HEADER.size:
            raise CodecError("malformed blinded result")
        n, bits, length = _HEADER.unpack(head)
        if not 1 <= bits <= MAX_RING_BITS:  # ring_dtype would raise InvalidInputError, not a codec error
            raise CodecError(f"blinded result declares a ring of 2^{bits}; rings are 2^1 .. 2^{MAX_RING_BITS}")
        survivors = tuple(ids.decode("utf-8", errors="replace").split("\n")) if ids else ()
        return cls(n, bits, survivors, decode_packed(packed, bits=bits, length=length, dtype=ring_dtype(bits)))


def unblind(result: BlindedResult, *, key: bytes, settings: Settings, session: bytes, round: int, tag: str,
            clients: Sequence[str]) -> torch.Tensor:
    """Acting as a group-key holder: remove the survivors' blindings and decode the sum.

    Raises:
        InvalidClaimError: the server's claims (client count, ring, survivor list) do not match
            this call: an unknown or repeated survivor, fewer than two, or another ring.
        ImplausibleSumError: with a ``norm_bound``, a sum its survivors cannot make within it
            (the range check the aggregator cannot run on a blinded sum).
    """
    if len(set(result.survivors)) != len(result.survivors) or not set(result.survivors) <= set(clients):
        raise InvalidClaimError(f"{tag!r}: the blinded result lists unknown or repeated survivors "
                                f"{list(result.survivors)}", reason=AbortReason.UNKNOWN_ID)
    if len(result.survivors) < 2:
        raise InvalidClaimError(f"{tag!r}: a blinded sum of {len(result.survivors)} input(s) is no sum",
                                reason=AbortReason.BELOW_THRESHOLD)
    quantizer = settings.quantizer(len(clients))
    if result.clients != len(clients) or result.bits != quantizer.bits:
        raise InvalidClaimError(f"{tag!r}: blinded result for {result.clients} clients in a 2^{result.bits} ring; "
                                f"this call has {len(clients)} in 2^{quantizer.bits}", reason=AbortReason.CONFIG_MISMATCH)
    acc = np.ascontiguousarray(result.ring_sum.astype(ring_dtype(result.bits)))
    expander = MaskExpander(settings.prg, result.bits)
    for u in result.survivors:
        expander.add_into(acc, blinding_seed(key, session=session, round=round, tag=tag, client=u), subtract=True)
    total = quantizer.dequantize(acc)
    check_sum(total, contributors=len(result.survivors), bound=settings.norm_bound, clip=settings.clip,
              error=quantizer.error_bound(len(result.survivors)), tag=tag)
    return torch.from_numpy(total)

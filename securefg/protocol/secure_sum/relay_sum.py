"""The relay's share of a ``peer_sum`` with ``relay_sum = true``: add the masked inputs it forwards.

In a ``peer_sum`` the server relays every client's masked input to the target, which adds them
up. A masked input is uniform in the ring to anyone without the client's self-mask seed ``b``
(its Shamir shares travel sealed to peers, and are revealed only to the target, sealed end to
end), so the relay may add the inputs itself and forward *one* packed ring vector instead of
``n``: the target's download shrinks from ``n`` vectors to one. The relay learns nothing it did
not see before in ``aggregate`` mode (masked vectors); what it gains is the power to corrupt
the sum undetected (the target can no longer authenticate each input end to end), so the
option suits an honest-but-curious server and is off by default.

Message (relay -> target, stage ``MASKED_INPUT``)::

    length_prefixed(ids of the summed clients, encode_packed(ring sum))
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from securefg.errors import CodecError
from securefg.federation.channel import length_prefixed, split_length_prefixed
from securefg.federation.party import is_client
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.messages import decode_ids, encode_ids
from securefg.protocol.secure_sum.packing import decode_packed, encode_packed
from securefg.protocol.secure_sum.prg import ring_dtype
from securefg.protocol.secure_sum.route import Route


def forward_sum(route: Route, *, clients: Sequence[str], bits: int, length: int) -> None:
    """As the relay: add the well-formed masked inputs of ``clients`` and send the sum on.

    A masked input that fails to decode (another ring, length or size) is left out, as if its
    client had dropped; the target learns who is in the sum from the message.
    """
    dtype = ring_dtype(bits)
    total = np.zeros(length, dtype=dtype)
    summed: list[str] = []
    for env in route.transport.receive(route.relay, tag=route.tag, round=route.round, stage=Stage.MASKED_INPUT.value):
        if not is_client(env.sender) or env.sender not in clients or env.sender in summed:
            continue
        try:
            y = decode_packed(env.payload, bits=bits, length=length, dtype=dtype)
        except CodecError:
            continue
        np.add(total, y, out=total)
        summed.append(env.sender)
    route.up_from_relay(Stage.MASKED_INPUT, encode_summed(sorted(summed), total, bits))


def encode_summed(ids: Sequence[str], total: np.ndarray, bits: int) -> bytes:
    """The relay's message: who is in the sum, and the packed ring sum."""
    return length_prefixed(encode_ids(ids), encode_packed(total, bits))


def decode_summed(data: bytes, *, bits: int, length: int) -> tuple[tuple[str, ...], np.ndarray]:
    """Parse :func:`encode_summed` output (the sum as words of :func:`ring_dtype`).

    Raises:
        CodecError: malformed ids, trailing bytes, or a packing of another ring or length.
    """
    (ids, packed), end = split_length_prefixed(data, 2)
    if end != len(data):
        raise CodecError("relayed masked sum: trailing bytes")
    total = decode_packed(packed, bits=bits, length=length, dtype=ring_dtype(bits))
    return decode_ids(ids, "summed clients"), total if total.flags.writeable else total.copy()

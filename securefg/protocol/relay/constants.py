"""Stage names of the relay mechanisms and the binding of sealed items to their context."""

from __future__ import annotations

import struct

from securefg.federation.channel import length_prefixed
from securefg.protocol.mechanism import ExchangeCall


class RelayStage:
    """Envelope ``stage`` values of ``sealed_relay`` and ``ckks_relay``."""

    UPLOAD = "relay/upload"
    TO_SHUFFLER = "relay/to_shuffler"
    FROM_SHUFFLER = "relay/from_shuffler"
    FORWARD = "relay/forward"


def item_binding(call: ExchangeCall, recipient: str, purpose: bytes) -> bytes:
    """Associated data of a sealed item: session, round, tag, recipient and purpose.

    The sender is deliberately absent: a box must not reveal who sealed it. (Where a relay
    checks senders, the sender's key enters the box's own key derivation instead:
    :meth:`~securefg.protocol.relay.sealed_box.SealingKey.seal_from`.)
    """
    return length_prefixed(
        b"securefg/relay/v1",
        call.transport.session,
        struct.pack("<q", call.round),
        call.tag.encode(),
        recipient.encode(),
        purpose,
    )

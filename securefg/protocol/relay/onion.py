"""The shuffler path of ``sealed_relay``: one-hop onion routing through a non-server party.

Senders upload onions ``seal(shuffler, recipient || seal(recipient, item))``. The server cannot
open them; it shuffles the whole batch (so the shuffler cannot tell senders by position) and hands
it to the shuffler. The shuffler peels the outer layer, learns only each inner box's recipient,
shuffles each recipient's bundle and returns the bundles to the server, which forwards them.
The server never saw an inner box before forwarding it, so it cannot link it to an upload; the
shuffler never learns who sent what. Both together can (non-collusion assumption).
"""

from __future__ import annotations

from collections.abc import Mapping

from securefg.errors import ProtocolError
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import SHUFFLER
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.relay import sealing_directory
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.constants import RelayStage, item_binding
from securefg.protocol.relay.sealed_box import SealingKey
from securefg.protocol.relay.shuffle import secure_shuffle


def shuffler_route(
    call: ExchangeCall, uploads: Mapping[str, bytes], targets: Mapping[str, list[str]]
) -> dict[str, list[bytes]]:
    """Route onion uploads through the shuffler; returns the server's per-recipient bundles.

    Args:
        call (ExchangeCall): The exchange.
        uploads (Mapping[str, bytes]): Sender -> its upload (a blob list of onions), as the server got it.
        targets (Mapping[str, list[str]]): Sender -> recipients it must have addressed.
    """
    # --- server: check counts, mix all onions, hand them to the shuffler
    batch: list[bytes] = []
    for s in sorted(uploads):
        onions = unpack_blobs(uploads[s], max_count=len(targets[s]))
        if len(onions) != len(targets[s]):
            raise ProtocolError(f"{s} uploaded {len(onions)} onions, expected {len(targets[s])}")
        batch += onions
    call.transport.send(
        Envelope(call.server, (SHUFFLER,), call.round, call.tag, pack_blobs(secure_shuffle(batch)),
                 stage=RelayStage.TO_SHUFFLER, form=Form.SEALED)
    )

    # --- shuffler: peel, group by recipient, check counts, shuffle, return
    (env,) = call.transport.receive_from(
        SHUFFLER, [call.server], tag=call.tag, round=call.round, stage=RelayStage.TO_SHUFFLER
    ).values()
    key = sealing_directory.own_key(call, SHUFFLER)
    binding = item_binding(call, SHUFFLER, b"onion")
    expected: dict[str, int] = {}
    for rs in targets.values():
        for r in rs:
            expected[r] = expected.get(r, 0) + 1
    call.transport.send(
        env.reply(peel_and_shuffle(key, env.payload, binding=binding, expected=expected), sender=SHUFFLER, stage=RelayStage.FROM_SHUFFLER, form=Form.SEALED)
    )

    # --- server: read the bundles
    (back,) = call.transport.receive_from(
        call.server, [SHUFFLER], tag=call.tag, round=call.round, stage=RelayStage.FROM_SHUFFLER
    ).values()
    fields = unpack_blobs(back.payload, max_count=2 * len(expected))
    bundles = {
        r.decode("utf-8", errors="replace"): unpack_blobs(b, max_count=expected.get(r.decode("utf-8", errors="replace"), 0))
        for r, b in zip(fields[0::2], fields[1::2])
    }
    if set(bundles) != set(expected):
        raise ProtocolError(f"shuffler returned bundles for {sorted(bundles)}, expected {sorted(expected)}")
    return bundles


def peel_and_shuffle(key: SealingKey, batch: bytes, *, binding: bytes, expected: Mapping[str, int]) -> bytes:
    """The shuffler's work: open each onion's outer layer, group the inner items by recipient,
    check each recipient gets exactly ``expected[r]``, shuffle each group (CSPRNG); the packed reply.

    Raises:
        AuthenticationError: A layer not sealed to the shuffler under ``binding``.
        ProtocolError: A layer that is not (recipient, item), or counts per recipient that differ.
    """
    grouped: dict[str, list[bytes]] = {}
    for onion in unpack_blobs(batch, max_count=sum(expected.values())):
        fields = unpack_blobs(key.open(onion, context=binding), max_count=2)
        if len(fields) != 2:
            raise ProtocolError("an onion layer must hold exactly a recipient and a sealed item")
        grouped.setdefault(fields[0].decode("utf-8", errors="replace"), []).append(fields[1])
    counts = {r: len(b) for r, b in grouped.items()}
    if counts != dict(expected):
        raise ProtocolError(f"shuffler got items per recipient {counts}, expected {dict(expected)}")
    reply: list[bytes] = []
    for r in sorted(grouped):
        reply += [r.encode(), pack_blobs(secure_shuffle(grouped[r]))]
    return pack_blobs(reply)

"""What the authenticated channel costs over its AEAD: ``python bench/channel.py [--quick]``.

Every cross-party message is sealed by its sender's :class:`~securefg.federation.channel.ChannelEndpoint`
and opened by its receiver's (ChaCha20-Poly1305 over the body, the header as associated data),
and a relayed item is also a sealed box (:mod:`securefg.protocol.relay.sealed_box`) in a padded
frame. FedSage+ sends about 1.8 MB per generated batch, M(M-1) of them per federated step, so
what the layers add to the cipher itself shows in every run. For bodies of 64 KB, 1.8 MB and
16 MB, the best of several timings of: raw ``ChaCha20Poly1305`` encrypt and decrypt, channel
``seal`` and ``open``, and a relayed item: ``frame`` (padded to a power of two) then ``seal`` to the
recipient's key, ``open`` then ``unframe``.
The allocator is set as the ``securefg`` command sets it (:mod:`securefg.allocator`;
``SECUREFG_ALLOCATOR=system`` for glibc's defaults).
The last lines are ``channel_seal_vs_aead``, ``channel_open_vs_aead``, ``relay_seal_vs_aead`` and ``relay_open_vs_aead``
(our time over the raw cipher's on the 1.8 MB body; 1.00 means the layer adds nothing).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from securefg.allocator import keep_large_buffers
from securefg.federation.channel import ChannelEndpoint, ChannelIdentity
from securefg.federation.envelope import Envelope
from securefg.protocol.relay.padding import frame, unframe
from securefg.protocol.relay.sealed_box import SealingKey, seal

HEADLINE = 1_800_000  # bytes: one FedSage+ generated batch on Cora (64 x 5 x 1,433 float32)


def _best_ms(fn: Callable[[], object], repeats: int, inner: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - start) / inner)
    return best * 1e3


def measure(size: int, repeats: int, inner: int) -> dict[str, float]:
    """Milliseconds per call of each operation on a ``size``-byte body."""
    body = os.urandom(size)
    aead, nonce = ChaCha20Poly1305(ChaCha20Poly1305.generate_key()), os.urandom(12)
    sealed = aead.encrypt(nonce, body, b"header")
    alice, bob = ChannelIdentity("alice"), ChannelIdentity("bob")
    directory = {"alice": alice.public_bytes, "bob": bob.public_bytes}
    session = os.urandom(16)
    sender, receiver = ChannelEndpoint(alice, session, directory), ChannelEndpoint(bob, session, directory)
    envelope = Envelope(sender="alice", receivers=("bob",), round=0, tag="bench", payload=body)
    wire = sender.seal(envelope, "bob")

    def channel_open() -> None:
        receiver.rollback({"alice": 0})  # the same wire, opened as if for the first time
        receiver.open(wire)

    key = SealingKey()
    context = b"bench/relay"
    box = seal(key.public_bytes, frame(body, "pow2"), context=context)
    return {
        "aead_encrypt": _best_ms(lambda: aead.encrypt(nonce, body, b"header"), repeats, inner),
        "aead_decrypt": _best_ms(lambda: aead.decrypt(nonce, sealed, b"header"), repeats, inner),
        "channel_seal": _best_ms(lambda: sender.seal(envelope, "bob"), repeats, inner),
        "channel_open": _best_ms(channel_open, repeats, inner),
        "relay_seal": _best_ms(lambda: seal(key.public_bytes, frame(body, "pow2"), context=context), repeats, inner),
        "relay_open": _best_ms(lambda: unframe(key.open(box, context=context)), repeats, inner),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, the headline size only")
    args = parser.parse_args()
    # as the securefg command runs (SECUREFG_ALLOCATOR=system: glibc's defaults)
    print(f"# allocator keeps freed large buffers: {keep_large_buffers()}")
    sizes = [HEADLINE] if args.quick else [64_000, HEADLINE, 16_000_000]
    headline: dict[str, float] = {}
    for size in sizes:
        inner = max(1, min(50, 20_000_000 // size))
        times = measure(size, repeats=3 if args.quick else 7, inner=inner)
        print(f"# {size / 1e6:.3f} MB body: " + ", ".join(f"{k} {v:.3f} ms" for k, v in times.items()))
        if size == HEADLINE:
            headline = times
    print(f"channel_seal_vs_aead={headline['channel_seal'] / headline['aead_encrypt']:.2f}")
    print(f"channel_open_vs_aead={headline['channel_open'] / headline['aead_decrypt']:.2f}")
    print(f"relay_seal_vs_aead={headline['relay_seal'] / headline['aead_encrypt']:.2f}")
    print(f"relay_open_vs_aead={headline['relay_open'] / headline['aead_decrypt']:.2f}")


if __name__ == "__main__":
    main()

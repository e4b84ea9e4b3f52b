"""Relays among clients through the server that the server can neither read nor link.

Mechanisms for the ``relay`` exchange (what each protects against is in its module docstring):

* ``sealed_relay`` (:mod:`.sealed_relay`): opaque items sealed end to end to each recipient
  (X25519 + HKDF + ChaCha20-Poly1305), padded, CSPRNG-shuffled by the server; optionally routed
  as onions through a ``shuffler`` party (:mod:`.onion`) so the server cannot link them either.
  Items are tied to their senders so the server cannot swap in its own: shuffled, by a
  membership secret each recipient shares with its senders (:mod:`.membership`: proves *a*
  member sealed it, not which); unshuffled, by the sender's static sealing key.
* ``mailbox`` (:mod:`.mailbox`): not a relay among clients but its mirror for the ``collect`` and
  ``reply`` exchanges: uploads to the server under session pseudonyms through the shuffler, and
  replies sealed back to each pseudonym's owner.
* ``ckks_relay`` (:mod:`.ckks_relay`): float tensors as CKKS ciphertexts under the clients' key,
  which the server can combine linearly, and rerandomizes per copy. It is registered when
  :mod:`securefg.protocol.ckks` is imported (which this package does), because it builds on the
  CKKS key session and the CKKS package in turn uses this package's sealing primitives.

Building blocks: :mod:`.sealed_box`, :mod:`.sealing_directory`, :mod:`.membership`,
:mod:`.padding`, :mod:`.shuffle`, :mod:`.blob_list`.
"""

from __future__ import annotations

import securefg.protocol.ckks  # noqa: F401  (registers ckks_relay; see above)
from securefg.protocol.relay.mailbox import Mailbox
from securefg.protocol.relay.sealed_box import SealingKey, seal
from securefg.protocol.relay.sealed_relay import SealedRelay
from securefg.protocol.relay.shuffle import secure_permutation, secure_shuffle

__all__ = ["Mailbox", "SealedRelay", "SealingKey", "seal", "secure_permutation", "secure_shuffle"]

"""FED-PUB (Baek et al., ICML 2023), split by party and concern.

* :mod:`.method` -- the round, message tags, options; drives both halves through the exchange.
* :mod:`.client` -- the client half: masked-GCN training (L1 on masks, proximal term) and the
  functional embedding.
* :mod:`.server` -- the server half: similarity -> softmax weights with the peer-weight cap.
* :mod:`.proxy` -- the proxy SBM graph every client rebuilds from a public seed.
"""

from __future__ import annotations

from securefg.methods.fedpub.method import TAG_EMBEDDING, TAG_METRICS, TAG_MODEL, TAG_WEIGHTS, FedPub

__all__ = ["TAG_EMBEDDING", "TAG_METRICS", "TAG_MODEL", "TAG_WEIGHTS", "FedPub"]

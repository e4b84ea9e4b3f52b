"""FedSheafHN (Liang et al., 2024), split by party and concern.

* :mod:`.method` -- the round, message tags, options; drives both halves through the exchange.
* :mod:`.client` -- the client half: warm-up, graph-level embedding, fine-tuning generated layers.
* :mod:`.server` -- the server half: kNN collaboration graph, sheaf diffusion, hypernetwork, update.
"""

from __future__ import annotations

from securefg.methods.fedsheafhn.method import (
    STRUCTURAL_LEAK,
    TAG_EMBEDDING,
    TAG_FEEDBACK,
    TAG_METRICS,
    TAG_WEIGHTS,
    FedSheafHN,
)

__all__ = ["STRUCTURAL_LEAK", "TAG_EMBEDDING", "TAG_FEEDBACK", "TAG_METRICS", "TAG_WEIGHTS", "FedSheafHN"]

"""FedSage / FedSage+ (Zhang et al., NeurIPS 2021), split by party and concern.

* :mod:`.method` -- both methods: options, the FedAvg rounds, global-test evaluation, and
  FedSage+'s setup (local NeighGen, federated NeighGen, mending).
* :mod:`.impair` -- an owner hides some of its nodes (graph-mending simulation).
* :mod:`.client` -- the owner half: NeighGen losses, a peer's gradient, mending.
* :mod:`.federated` -- the cross-owner generator phase over ``relay`` and ``peer_sum``.
"""

from __future__ import annotations

from securefg.methods.fedsage.federated import TAG_FEATURE_GRAD, TAG_GENERATED
from securefg.methods.fedsage.method import FedSage, FedSagePlus

__all__ = ["TAG_FEATURE_GRAD", "TAG_GENERATED", "FedSage", "FedSagePlus"]

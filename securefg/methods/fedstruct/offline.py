r"""FedStruct-B's offline phase: Algorithm 3 with every sum carried by ``peer_sum``.

The parties' steps are in :mod:`securefg.methods.fedstruct.method` (``FedStruct.server_prepare``
and the ``fedstruct/abar/*`` client actions); this module holds what they share.

For each hop ``ℓ = 2..L_s`` and each receiver ``i``, every other client ``k`` contributes
:math:`B_{i\cdot k} = \tilde{A}_k^{[i]} P_k^{(\ell-1)}` (an ``[n_i, n]`` matrix, zeros where ``k``
has no edge to ``i``, so every peer sends the same shape and sending reveals nothing by
itself) to one ``peer_sum`` with target ``i`` under tag ``fedstruct/abar``; ``i`` adds its own
term locally and normalises. By default (``abar_rows=boundary``) every peer sends only ``i``'s
boundary rows (nodes with a neighbour in another client; the other rows are zero in every
peer's message), in a layout ``i`` announced first (``fedstruct/boundary``,
:mod:`~securefg.methods.fedstruct.boundary`). Under a masked stack ``i`` sees only the sum;
under plaintext it sees every :math:`B_{i\cdot k}` (the baseline the structure-link attack
measures).

Each hop runs in its own (negative, pre-training) round ``ℓ - L_s - 1`` so transcripts keep
the hops apart. Pruned messages (App. L.2.1) are still sent as full blocks of the layout's rows:
a masked sum needs one public layout, and the pruned support is data-dependent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TAG_ABAR = "fedstruct/abar"


@dataclass(frozen=True)
class OfflineCost:
    """What the offline Ā phase cost, read from the transcript and the clock."""

    hops: int
    peer_sums: int
    bytes: int
    wire_bytes: int
    seconds: float
    prune_p: int
    nonzeros: int
    """Non-zero entries over all messages sent: what a sparse encoding would carry (the paper's
    O(L_s p n) under pruning); the masked layout sends every entry of its rows regardless."""
    layout_bytes: int = 0
    """Bytes of the row layouts announced first (``fedstruct/boundary``; 0 in the dense layout)."""
    row_layout: str = "all"
    """``abar_rows``: ``boundary`` (each receiver's rows with a remote neighbour) or ``all``."""

    def to_dict(self) -> dict[str, float | int | str]:
        return {"hops": self.hops, "peer_sums": self.peer_sums, "bytes": self.bytes,
                "wire_bytes": self.wire_bytes, "seconds": self.seconds, "prune_p": self.prune_p,
                "nonzeros_sent": self.nonzeros, "row_layout": self.row_layout, "layout_bytes": self.layout_bytes}


def structure_view(state: Mapping[str, Any]) -> Any:
    """The client's graph for Ā: ``structure_view`` when set (edge DP), else its true ``graph_view``."""
    view = state.get("structure_view")
    return view if view is not None else state["graph_view"]


def offline_round(hop: int, hops: int) -> int:
    """The round number hop ``hop`` runs in: ``2 - L_s - 1 .. -1``, before training round 0."""
    return hop - hops - 1

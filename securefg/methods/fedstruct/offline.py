r"""FedStruct-B's offline phase: Algorithm 3 with every sum carried by ``peer_sum``.

For each hop ``ℓ = 2..L_s`` and each receiver ``i``, every other client ``k`` contributes
:math:`B_{i\cdot k} = \tilde{A}_k^{[i]} P_k^{(\ell-1)}` (an ``[n_i, n]`` matrix, zeros where ``k``
has no edge to ``i``, so every peer sends the same shape and sending reveals nothing by
itself) to one ``peer_sum`` with target ``i`` under tag ``fedstruct/abar``; ``i`` adds its own
term locally and normalises. Under a masked stack ``i`` sees only the sum; under plaintext it
sees every :math:`B_{i\cdot k}` (the baseline the structure-link attack measures).

Each hop runs in its own (negative, pre-training) round ``ℓ - L_s - 1`` so transcripts keep
the hops apart. Pruned messages (App. L.2.1) are still sent as full ``[n_i, n]`` blocks: a
masked sum needs one public layout, and the pruned support is data-dependent.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from securefg.federation.federation import Federation
from securefg.federation.party import client_id
from securefg.models.fedstruct import AbarState, assemble, init_abar_state
from securefg.models.fedstruct.abar_protocol import contribution

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
    O(L_s p n) under pruning); the dense masked layout sends every entry regardless."""

    def to_dict(self) -> dict[str, float | int]:
        return {"hops": self.hops, "peer_sums": self.peer_sums, "bytes": self.bytes,
                "wire_bytes": self.wire_bytes, "seconds": self.seconds, "prune_p": self.prune_p,
                "nonzeros_sent": self.nonzeros}


def structure_view(state: Mapping[str, Any]) -> Any:
    """The client's graph for Ā: ``structure_view`` when set (edge DP), else its true ``graph_view``."""
    view = state.get("structure_view")
    return view if view is not None else state["graph_view"]


def offline_round(hop: int, hops: int) -> int:
    """The round number hop ``hop`` runs in: ``2 - L_s - 1 .. -1``, before training round 0."""
    return hop - hops - 1


def run_algorithm3(fed: Federation, *, betas: tuple[float, ...], prune_p: int = 0) -> OfflineCost:
    """Give every client its rows ``abar`` of Ā; each party acts on its own state only.

    Reads ``structure_view`` (the graph it computes on: the true ``graph_view``, or under
    ``edge_dp_epsilon`` the reported one) and ``directory`` from each client's state and writes
    ``abar`` (``[n_i, n]``, float64) and ``betas`` there.
    """
    start, before = time.perf_counter(), len(fed.transcript)
    pids = fed.client_ids
    states: dict[str, AbarState] = {}
    for pid in pids:
        s = fed.parties[pid].state
        states[pid] = init_abar_state(structure_view(s), s["directory"], betas=betas, dtype=torch.float64)
    hop, sums, nnz = 1, 0, 0
    while not states[pids[0]].done:
        hop += 1
        fed.set_round(offline_round(hop, len(betas)))
        new: dict[str, AbarState] = {}
        for i, target in enumerate(pids):
            inputs = {pid: {"b": _message(fed, pid, states[pid], i, prune_p)} for pid in pids if pid != target}
            own = _message(fed, target, states[target], i, prune_p)
            nnz += sum(int(v["b"].count_nonzero()) for v in inputs.values())
            if inputs:
                summed = fed.exchange.peer_sum(TAG_ABAR, target, inputs)["b"].to(torch.float64) + own
                sums += 1
            else:  # a single client: nothing to receive
                summed = own
            new[target] = assemble(structure_view(fed.parties[target].state), states[target], summed=summed)
        states = new
    for pid in pids:
        fed.parties[pid].state.update(abar=states[pid].abar, betas=list(betas))
    records = list(fed.transcript)[before:]
    mine = [r for r in records if r.tag == TAG_ABAR]
    return OfflineCost(hop, sums, sum(r.payload_bytes for r in mine), sum(r.wire_bytes for r in mine),
                       time.perf_counter() - start, prune_p, nnz)


def _message(fed: Federation, pid: str, state: AbarState, receiver: int, prune_p: int) -> torch.Tensor:
    """Client ``pid``'s message to client ``receiver``, computed from ``pid``'s own state."""
    s = fed.parties[pid].state
    assert pid == client_id(state.client_id)
    return contribution(structure_view(s), state, directory=s["directory"], receiver=receiver,
                        prune_p=prune_p or None)

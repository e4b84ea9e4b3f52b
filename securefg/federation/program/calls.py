"""The :class:`~securefg.protocol.mechanism.ExchangeCall` one party builds in its own process.

Mechanism code reads the run's parties from ``call.parties`` (who exists: the key holder is
the ``keyholder`` party when the run has one, distributed DP counts the clients) and touches
only the state of the party it acts as. In a party's own process every other party is an
empty stand-in, so code that strayed into another party's state would find nothing there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from securefg.federation.party import SERVER, Party
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.stack import Resolved


def stand_ins(own: Party, pids: Iterable[str]) -> dict[str, Party]:
    """``own`` plus an empty stand-in for the server and every party in ``pids``."""
    return {**{pid: Party(pid) for pid in (SERVER, *pids)}, own.pid: own}


def party_call(transport: object, parties: Mapping[str, Party], *, round: int, tag: str, res: Resolved,
               kind: ExchangeKind, rng: torch.Generator | None = None) -> ExchangeCall:
    """The call ``res``'s mechanism serves for ``tag`` this round, from one party's process."""
    return ExchangeCall(transport=transport, parties=parties, round=round, tag=tag,  # type: ignore[arg-type]
                        params=res.mechanism.params, server=SERVER, rng=rng, kind=kind)

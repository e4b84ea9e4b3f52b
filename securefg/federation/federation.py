"""A federation: the parties of one run, their network, and the exchange API over it."""

from __future__ import annotations

from collections.abc import Iterable

from securefg.federation.exchange import Exchange
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.transcript import Transcript
from securefg.federation.transport import InProcessTransport
from securefg.protocol.secure_sum.pinned import provision_run, uses_run_directory
from securefg.protocol.stack import ProtocolStack


class Federation:
    """Server, ``num_clients`` clients and optional helper parties on one in-process network.

    Args:
        num_clients (int): Number of clients.
        stack (ProtocolStack): Which mechanism carries which message tag.
        seed (int): Seed for simulation randomness. (default: ``0``)
        extra_parties (Iterable[str]): E.g. ``"keyholder"``, ``"shuffler"``. (default: none)
        keep_payloads (bool | Iterable[str]): Payloads the transcript keeps (for audits).
    """

    def __init__(
        self,
        num_clients: int,
        stack: ProtocolStack,
        *,
        seed: int = 0,
        extra_parties: Iterable[str] = (),
        keep_payloads: bool | Iterable[str] = False,
    ) -> None:
        if num_clients < 1:
            raise ValueError(f"a federation needs at least one client, got {num_clients}")
        ids = [SERVER, *(client_id(k) for k in range(num_clients)), *extra_parties]
        self.parties: dict[str, Party] = {pid: Party(pid) for pid in ids}
        self.transcript = Transcript(keep_payloads)
        self.transport = InProcessTransport(ids, transcript=self.transcript)
        self.stack = stack
        self.exchange = Exchange(transport=self.transport, stack=stack, parties=self.parties, seed=seed)
        if uses_run_directory(stack):  # secure sums' pinned_keys = "run": made here, as the channel keys are
            provision_run(self.parties)

    @property
    def server(self) -> Party:
        return self.parties[SERVER]

    @property
    def client_ids(self) -> list[str]:
        return [p for p in self.parties if p.startswith("client/")]

    @property
    def clients(self) -> list[Party]:
        return [self.parties[p] for p in self.client_ids]

    def set_round(self, r: int) -> None:
        self.exchange.round = r

    def __repr__(self) -> str:
        return f"Federation(clients={len(self.client_ids)}, stack={self.stack.name!r})"

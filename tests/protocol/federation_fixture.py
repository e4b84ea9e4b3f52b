"""A small in-process federation built from an inline stack, shared by the mechanism tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from securefg.federation.exchange import Exchange
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.transcript import Transcript
from securefg.federation.transport import InProcessTransport
from securefg.protocol.stack import ProtocolStack


@dataclass
class Federation:
    exchange: Exchange
    transport: InProcessTransport
    parties: dict[str, Party]

    @property
    def transcript(self) -> Transcript:
        return self.transport.transcript

    @property
    def clients(self) -> list[str]:
        return self.exchange.clients


def build_federation(
    n_clients: int, tags: Mapping[str, Mapping[str, Any]], *, extra: Iterable[str] = ()
) -> Federation:
    pids = [SERVER] + [client_id(k) for k in range(n_clients)] + list(extra)
    transport = InProcessTransport(pids, transcript=Transcript(keep_payloads=True))
    parties = {p: Party(p) for p in pids}
    stack = ProtocolStack.from_dict({"name": "test", "tags": {t: dict(b) for t, b in tags.items()}})
    return Federation(Exchange(transport=transport, stack=stack, parties=parties), transport, parties)

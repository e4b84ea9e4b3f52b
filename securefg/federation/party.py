"""Party identities and per-party private state.

A party is a name plus a private ``state`` dictionary that only code acting *as* that party
touches. Nothing in this module lets one party read another's state: the only way across is an
:class:`~securefg.federation.envelope.Envelope` through the transport.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SERVER = "server"
KEY_AUTHORITY = "keyholder"
SHUFFLER = "shuffler"


def client_id(k: int) -> str:
    """Return the canonical party id of client ``k`` (``"client/3"``)."""
    if k < 0:
        raise ValueError(f"client index must be >= 0, got {k}")
    return f"client/{k}"


def client_index(party: str) -> int:
    """Inverse of :func:`client_id`."""
    prefix, _, idx = party.partition("/")
    if prefix != "client" or not idx.isdigit():
        raise ValueError(f"{party!r} is not a client id (expected 'client/<k>')")
    return int(idx)


def is_client(party: str) -> bool:
    """Whether ``party`` names a client."""
    return party.startswith("client/")


@dataclass
class Party:
    """One participant: its id and the private state only it may touch.

    Args:
        pid (str): Party id (``"server"``, ``"client/3"``, ...).
        state (dict): Private state: models, data, keys. Serialisable by the checkpointing code.
    """

    pid: str
    state: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Party({self.pid!r})"

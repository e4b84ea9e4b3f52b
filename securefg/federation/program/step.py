"""One step of the party-program protocol: a server request to one party, and its reply.

The server names an ``action`` (a method's client handler or a mechanism stage), the (round,
tag, stage) it belongs to, and hands over the sealed envelope copies addressed to that party
(``wires``); the reply carries that party's sealed envelopes back. Everything a party learns
from another is inside ``wires``, sealed by our channels; ``info`` holds small public routing
facts (a party id, a vector layout, how many items a bundle holds), like a transport's own
metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Values ``info`` may hold (what every backend can carry without pickling).
InfoValue = str | int


@dataclass(frozen=True)
class Step:
    """One request or reply of the step protocol.

    Args:
        action (str): What the party should do, e.g. ``"fedavg/train"``, ``"aggregate"``.
        round (int): The round (-1: before the first).
        tag (str): The method's message tag it concerns ("" if none).
        stage (str): The mechanism stage ("" if none).
        wires (tuple[bytes, ...]): Sealed envelope copies for the receiver.
        info (dict[str, str | int]): Small public routing facts.
    """

    action: str
    round: int = -1
    tag: str = ""
    stage: str = ""
    wires: tuple[bytes, ...] = ()
    info: dict[str, InfoValue] = field(default_factory=dict)

    def framing_bytes(self) -> int:
        """Bytes of this step that are not sealed envelopes (routing fields)."""
        return len(self.action) + len(self.tag) + len(self.stage) + 8 + sum(
            len(str(k)) + len(str(v)) for k, v in self.info.items()
        )

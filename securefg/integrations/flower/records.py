"""How a securefg step travels as Flower ``Message`` content.

One step is one server -> client request and its reply: the server names an ``action`` (a
method handler or a mechanism stage), the (round, tag, stage) it belongs to, and hands over the
sealed envelope copies addressed to that client (``wires``); the reply carries the client's
sealed envelopes back. Everything a party learns from another is inside ``wires`` and goes
through our channels; the other fields are routing, like Flower's own metadata.

The content is one ``ConfigRecord`` named ``"securefg"`` in the message's ``RecordDict``; the
message type is ``query.securefg`` (a custom action, so it never meets Flower's own
``secaggplus_mod`` on ``train``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flwr.app import ConfigRecord, RecordDict

from securefg.errors import CodecError

RECORD = "securefg"
MESSAGE_TYPE = "query.securefg"


@dataclass(frozen=True)
class Step:
    """One request or reply of the step protocol.

    Args:
        action (str): What the client should do, e.g. ``"fedavg/train"``, ``"aggregate"``.
        round (int): The round.
        tag (str): The method's message tag it concerns ("" if none).
        stage (str): The mechanism stage ("" if none).
        wires (tuple[bytes, ...]): Sealed envelope copies for the receiver.
        info (dict[str, str | int]): Small public routing facts (e.g. the party id in ``hello``).
    """

    action: str
    round: int = -1
    tag: str = ""
    stage: str = ""
    wires: tuple[bytes, ...] = ()
    info: dict[str, str | int] = field(default_factory=dict)

    def to_content(self) -> RecordDict:
        rec: dict[str, object] = {
            "action": self.action, "round": self.round, "tag": self.tag, "stage": self.stage,
            "wires": list(self.wires),
        }
        for k, v in self.info.items():
            rec[f"info.{k}"] = v
        return RecordDict({RECORD: ConfigRecord(rec)})  # type: ignore[arg-type]

    @classmethod
    def from_content(cls, content: RecordDict) -> Step:
        """Parse a step; every field is type-checked (the content came over the network)."""
        if RECORD not in content.config_records:
            raise CodecError(f"Flower message has no {RECORD!r} config record; was it sent by securefg?")
        rec = content.config_records[RECORD]
        try:
            action, rnd, tag, stage = rec["action"], rec["round"], rec["tag"], rec["stage"]
            wires = rec.get("wires", [])
        except KeyError as exc:
            raise CodecError(f"securefg step misses field {exc}") from exc
        if not (isinstance(action, str) and isinstance(rnd, int) and isinstance(tag, str) and isinstance(stage, str)):
            raise CodecError("securefg step fields have the wrong types")
        if not isinstance(wires, list) or not all(isinstance(w, bytes) for w in wires):
            raise CodecError("securefg step 'wires' must be a list of bytes")
        info = {k[5:]: v for k, v in rec.items() if k.startswith("info.") and isinstance(v, (str, int))}
        return cls(action, rnd, tag, stage, tuple(wires), info)  # type: ignore[arg-type]

    def framing_bytes(self) -> int:
        """Bytes of this step that are not sealed envelopes (routing fields)."""
        return len(self.action) + len(self.tag) + len(self.stage) + 8 + sum(
            len(str(k)) + len(str(v)) for k, v in self.info.items()
        )

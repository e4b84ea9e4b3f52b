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

from flwr.app import ConfigRecord, RecordDict

from securefg.errors import CodecError
from securefg.federation.program import timing
from securefg.federation.program.step import Step

__all__ = ["MESSAGE_TYPE", "RECORD", "Step", "step_from_content", "step_to_content"]

RECORD = "securefg"
MESSAGE_TYPE = "query.securefg"


def step_to_content(step: Step) -> RecordDict:
    """A step as Flower ``Message`` content (one ``ConfigRecord``)."""
    with timing.timed("serialize"):
        return _to_content(step)


def step_from_content(content: RecordDict) -> Step:
    """Parse a step; every field is type-checked (the content came over the network)."""
    with timing.timed("serialize"):
        return _from_content(content)


def _to_content(step: Step) -> RecordDict:
    rec: dict[str, object] = {
        "action": step.action, "round": step.round, "tag": step.tag, "stage": step.stage,
        "wires": list(step.wires),
    }
    for k, v in step.info.items():
        rec[f"info.{k}"] = v
    return RecordDict({RECORD: ConfigRecord(rec)})  # type: ignore[arg-type]


def _from_content(content: RecordDict) -> Step:
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
    return Step(action, rnd, tag, stage, tuple(wires), info)  # type: ignore[arg-type]

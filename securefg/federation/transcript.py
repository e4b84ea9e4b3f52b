"""The transcript: a record of every envelope copy that crossed the network.

Byte and round counts, the audit's exposure ledger and every attack's view of the run are
computed from here and from nothing else. Payloads are kept only when asked for (they can be
large); metadata is always kept.
"""

from __future__ import annotations

import fnmatch
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from securefg.federation.envelope import Form
from securefg.federation.party import SERVER, is_client


def direction(sender: str, receiver: str) -> str:
    """``"up"`` (client->server), ``"down"`` (server->client), ``"peer"`` or ``"other"``."""
    if is_client(sender) and receiver == SERVER:
        return "up"
    if sender == SERVER and is_client(receiver):
        return "down"
    if is_client(sender) and is_client(receiver):
        return "peer"
    return "other"


@dataclass(frozen=True)
class Record:
    """One envelope copy as it crossed the network (sender -> one receiver)."""

    index: int
    round: int
    tag: str
    stage: str
    sender: str
    receiver: str
    form: Form
    payload_bytes: int
    wire_bytes: int
    is_error: bool
    payload: bytes | None = None

    @property
    def direction(self) -> str:
        return direction(self.sender, self.receiver)

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["form"] = self.form.value
        d.pop("payload")
        return d


def _matches(pattern: str, tag: str, round: int, stage: str = "") -> bool:
    """``pattern`` is a tag glob, optionally ``glob@round`` (an integer, may be negative), and
    optionally ``glob#stage-glob`` (only envelopes of matching stages, e.g. a sum's result)."""
    pattern, hashed, stage_glob = pattern.partition("#")
    if hashed and not fnmatch.fnmatchcase(stage, stage_glob):
        return False
    glob, _, at = pattern.rpartition("@")
    if glob and at.lstrip("-").isdigit():
        return int(at) == round and fnmatch.fnmatchcase(tag, glob)
    return fnmatch.fnmatchcase(tag, pattern)


class Transcript:
    """Append-only log of :class:`Record` s.

    Args:
        keep_payloads (bool | Iterable[str]): ``True`` keeps every payload; an iterable of tag
            glob patterns keeps only matching ones (``"tag@r"`` only round ``r`` of it, so an audit
            can keep one round of a bulky tag; ``"tag#stage"`` only that stage's envelopes); ``False`` keeps none. (default: :obj:`False`)
    """

    def __init__(self, keep_payloads: bool | Iterable[str] = False) -> None:
        self._records: list[Record] = []
        self._keep = keep_payloads if isinstance(keep_payloads, bool) else tuple(keep_payloads)

    def _keeps(self, tag: str, round: int, stage: str = "") -> bool:
        if isinstance(self._keep, bool):
            return self._keep
        return any(_matches(p, tag, round, stage) for p in self._keep)

    def append(
        self,
        *,
        round: int,
        tag: str,
        stage: str,
        sender: str,
        receiver: str,
        form: Form,
        payload: bytes,
        wire_bytes: int,
        is_error: bool = False,
    ) -> Record:
        rec = Record(
            index=len(self._records),
            round=round,
            tag=tag,
            stage=stage,
            sender=sender,
            receiver=receiver,
            form=form,
            payload_bytes=len(payload),
            wire_bytes=wire_bytes,
            is_error=is_error,
            payload=payload if self._keeps(tag, round, stage) else None,
        )
        self._records.append(rec)
        return rec

    def __len__(self) -> int:
        return len(self._records)

    def clear(self) -> None:
        """Drop every record (a resumed run replaces what its setup re-recorded)."""
        self._records.clear()

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    def records(
        self, *, tag: str | None = None, round: int | None = None, party: str | None = None
    ) -> list[Record]:
        """Records filtered by tag glob, round, and a party that sent or received them."""
        out = []
        for r in self._records:
            if tag is not None and not fnmatch.fnmatchcase(r.tag, tag):
                continue
            if round is not None and r.round != round:
                continue
            if party is not None and party not in (r.sender, r.receiver):
                continue
            out.append(r)
        return out

    def view(self, party: str) -> list[Record]:
        """Everything ``party`` received: an adversary's view is the union of its members'."""
        return [r for r in self._records if r.receiver == party]

    def bytes_total(self, *, wire: bool = False) -> int:
        return sum(r.wire_bytes if wire else r.payload_bytes for r in self._records)

    def bytes_by_tag(self, *, wire: bool = False) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self._records:
            out[r.tag] += r.wire_bytes if wire else r.payload_bytes
        return dict(sorted(out.items()))

    def bytes_by_party(self) -> dict[str, dict[str, int]]:
        """Bytes sent and received per party."""
        out: dict[str, dict[str, int]] = defaultdict(lambda: {"sent": 0, "received": 0})
        for r in self._records:
            out[r.sender]["sent"] += r.payload_bytes
            out[r.receiver]["received"] += r.payload_bytes
        return {k: dict(v) for k, v in sorted(out.items())}

    def bytes_by_round(self) -> dict[int, dict[str, int]]:
        """Bytes per round and direction."""
        out: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for r in self._records:
            out[r.round][r.direction] += r.payload_bytes
        return {k: dict(v) for k, v in sorted(out.items())}

    def communication_rounds(self) -> int:
        """Server-client rounds: maximal runs of envelopes in one direction (up or down).

        A "round" is a single exchange between the server and clients in either direction
        (the CeFGC paper's definition). Peer and other traffic does not start a new round.
        """
        count, last = 0, None
        for r in self._records:
            d = r.direction
            if d in ("up", "down") and d != last:
                count += 1
                last = d
        return count

    def forms_by_tag(self) -> dict[str, dict[str, dict[str, int]]]:
        """For each tag, per receiver, bytes by form: the raw material of the exposure ledger."""
        out: dict[str, dict[str, dict[str, int]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(int))
        )
        for r in self._records:
            out[r.tag][r.receiver][r.form.value] += r.payload_bytes
        return {t: {p: dict(f) for p, f in v.items()} for t, v in sorted(out.items())}

    def summary(self) -> dict[str, object]:
        return {
            "envelopes": len(self._records),
            "bytes_total": self.bytes_total(),
            "wire_bytes_total": self.bytes_total(wire=True),
            "bytes_by_tag": self.bytes_by_tag(),
            "bytes_by_party": self.bytes_by_party(),
            "bytes_by_round": {str(k): v for k, v in self.bytes_by_round().items()},
            "communication_rounds": self.communication_rounds(),
        }

    def save_jsonl(self, path: str | Path) -> None:
        """Write the metadata of every record as one JSON object per line."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r.to_json()) + "\n" for r in self._records)


def load_jsonl(path: str | Path, transcript: Transcript) -> int:
    """Re-append records saved by :meth:`Transcript.save_jsonl` (metadata only); returns count."""
    n = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            transcript.append(
                round=int(d["round"]), tag=d["tag"], stage=d["stage"], sender=d["sender"],
                receiver=d["receiver"], form=Form(d["form"]), payload=b"\0" * int(d["payload_bytes"]),
                wire_bytes=int(d["wire_bytes"]), is_error=bool(d["is_error"]),
            )
            n += 1
    return n

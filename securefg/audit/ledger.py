"""The exposure ledger: per message tag, who read it in the clear and who held only protected bytes.

Built from the transcript alone (metadata, no payloads), so it is exact and cheap, and it is
the first section of every audit report. A party "read" a tag in the clear when it received an
envelope of that tag in ``plaintext`` or ``aggregate`` form; every other form (``masked``,
``ciphertext``, ``sealed``, ``keys``) is listed with its receivers. Senders know what they sent
and are listed separately.

End-to-end protected items are *opened* by their recipients: a ``sealed`` or ``ciphertext``
envelope that a client or the key holder receives is readable by it under securefg's key
management (and so is a ``masked`` ``blind_sum`` result, blinded under the clients' group key) (sealed boxes are addressed to their final recipient; CKKS secret keys live with the
clients or the ``keyholder``, never with the server). ``opened_by`` lists those receivers, so a
reviewer sees that e.g. every CeFGC client reads the other clients' generators even though no
envelope of the tag travels in plaintext.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from securefg.federation.envelope import Form
from securefg.federation.transcript import Transcript

CLEAR = (Form.PLAINTEXT.value, Form.AGGREGATE.value)
OPENED = (Form.SEALED.value, Form.CIPHERTEXT.value)
OPENED_MASKED_STAGES = frozenset({"shared_sum/result"})
"""Stages whose ``masked`` envelopes their client receivers open: a ``blind_sum`` result is
blinded under the clients' group key, so every client reads it and the server does not."""


@dataclass(frozen=True)
class LedgerRow:
    """One message tag of a run.

    Args:
        tag (str): The message tag.
        senders (tuple[str, ...]): Parties that sent it.
        clear_readers (tuple[str, ...]): Parties that received it as plaintext or aggregate.
        protected (Mapping[str, tuple[str, ...]]): Form -> parties that received it only so (neither
            in the clear nor able to open it).
        bytes_by_form (Mapping[str, int]): Payload bytes per form.
        envelopes (int): Envelope copies (one per receiver).
        rounds (int): Distinct rounds it appeared in.
        opened_by (tuple[str, ...]): Non-server receivers of sealed or ciphertext envelopes,
            which hold the keys to open them.
    """

    tag: str
    senders: tuple[str, ...]
    clear_readers: tuple[str, ...]
    protected: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    bytes_by_form: Mapping[str, int] = field(default_factory=dict)
    envelopes: int = 0
    rounds: int = 0
    opened_by: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(self.bytes_by_form.values())

    def to_dict(self) -> dict[str, Any]:
        return {"tag": self.tag, "senders": list(self.senders), "clear_readers": list(self.clear_readers),
                "protected": {k: list(v) for k, v in self.protected.items()}, "bytes_by_form": dict(self.bytes_by_form),
                "bytes": self.bytes, "envelopes": self.envelopes, "rounds": self.rounds, "opened_by": list(self.opened_by)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LedgerRow:
        return cls(str(d["tag"]), tuple(d["senders"]), tuple(d["clear_readers"]),
                   {k: tuple(v) for k, v in d["protected"].items()}, {k: int(v) for k, v in d["bytes_by_form"].items()},
                   int(d["envelopes"]), int(d["rounds"]), tuple(d.get("opened_by", ())))


def exposure_ledger(transcript: Transcript | Iterable[Any]) -> tuple[LedgerRow, ...]:
    """The ledger of a transcript, one row per tag, sorted by tag."""
    senders: dict[str, set[str]] = defaultdict(set)
    readers: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    nbytes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    count: dict[str, int] = defaultdict(int)
    rounds: dict[str, set[int]] = defaultdict(set)
    opened_masked: dict[str, set[str]] = defaultdict(set)
    for r in transcript:
        senders[r.tag].add(r.sender)
        if r.form is Form.MASKED and r.stage in OPENED_MASKED_STAGES:
            opened_masked[r.tag].add(r.receiver)
        readers[r.tag][r.form.value].add(r.receiver)
        nbytes[r.tag][r.form.value] += r.payload_bytes
        count[r.tag] += 1
        rounds[r.tag].add(r.round)
    rows = []
    for tag in sorted(count):
        clear = set().union(*(readers[tag].get(f, set()) for f in CLEAR))
        opened = set().union(opened_masked[tag], *(readers[tag].get(f, set()) for f in OPENED)) - {"server"} - clear
        prot = {f: tuple(sorted(p - clear - opened, key=_party_key)) for f, p in sorted(readers[tag].items())
                if f not in CLEAR}
        rows.append(LedgerRow(tag, tuple(sorted(senders[tag], key=_party_key)), tuple(sorted(clear, key=_party_key)),
                              {f: p for f, p in prot.items() if p}, dict(nbytes[tag]), count[tag], len(rounds[tag]),
                              tuple(sorted(opened, key=_party_key))))
    return tuple(rows)


def clear_to(rows: Iterable[LedgerRow], parties: Iterable[str]) -> list[str]:
    """Tags some of ``parties`` read in the clear (what this adversary can decode)."""
    mine = set(parties)
    return [r.tag for r in rows if mine & set(r.clear_readers)]


def opened_by(rows: Iterable[LedgerRow], parties: Iterable[str]) -> list[str]:
    """Tags some of ``parties`` receive end-to-end protected and can open (they hold the keys)."""
    mine = set(parties)
    return [r.tag for r in rows if mine & set(r.opened_by)]


def _party_key(p: str) -> tuple[int, int, str]:
    if p.startswith("client/") and p[7:].isdigit():
        return (1, int(p[7:]), p)
    return (0 if p == "server" else 2, 0, p)


def compress_parties(parties: Iterable[str]) -> str:
    """``client/0, client/1, ..., client/9`` -> ``client/0..9``; other names kept."""
    ps = sorted(set(parties), key=_party_key)
    ids = [int(p[7:]) for p in ps if p.startswith("client/") and p[7:].isdigit()]
    others = [p for p in ps if not (p.startswith("client/") and p[7:].isdigit())]
    runs: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        runs.append(f"client/{ids[i]}" if i == j else f"client/{ids[i]}..{ids[j]}")
        i = j + 1
    return ", ".join(others + runs) or "nobody"


__all__ = ["LedgerRow", "clear_to", "compress_parties", "exposure_ledger", "opened_by"]

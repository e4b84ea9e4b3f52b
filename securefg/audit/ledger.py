"""The exposure ledger: per message tag, who read it, in what form, and who held only protected bytes.

Who *received* what comes from the transcript (metadata, no payloads): senders, receivers, the
form of every envelope, bytes and rounds. Who *reads* it comes from the exposure declaration of
the mechanism the stack binds the tag to (:mod:`securefg.protocol.exposure`), never from the
wire forms alone: a ``sealed`` envelope is read by the party it is sealed to, which may be its
receiver (the server opening the shuffler's batch under ``mailbox``) or a party further on (the
shuffler's onions are sealed to it, their content to the server). Guessing from forms listed
FedSheafHN's shuffler as opening the embeddings and the server as reading nothing (issue 38).

Per tag, each receiver is in exactly one place:

* ``clear_readers``: it received the tag in ``plaintext`` or ``aggregate`` form. A readable
  envelope is read whatever the declaration says; if the declaration does not grant that role
  a reading, the party is also listed in ``undeclared`` (a mechanism that leaks beyond its
  declaration).
* ``opened_by``: it received only protected forms and its role reads them by declaration: it
  opens boxes sealed to it, decrypts under a key it holds, or unmasks a sum (the secure-sum
  server reads the sum it unmasks; ``blind_sum`` clients read the sum they unblind).
* ``protected``: form -> parties that held only those bytes and read nothing.

``aggregate_only`` marks the readers (clear or opened) that read only an aggregate: a sum or
another combination of several parties' values, or their own personal combination.

Limit: a ``peer_sum`` call's target and its peers exchange envelopes of the same stages and
forms, so the metadata cannot tell them apart; every client taking part in a peer-summed tag is
listed as reading its own sum, which overstates a client that is only ever a peer (client 0 of
FedStruct's ``fedstruct/edge_rr``, where only higher-numbered clients receive reports).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from securefg.errors import ConfigError
from securefg.federation.envelope import Form
from securefg.federation.transcript import Transcript
from securefg.protocol.exposure import READS, Exposure, exposure_of, reading, roles_of
from securefg.protocol.mechanism import ExchangeKind, mechanism_class
from securefg.protocol.stack import ProtocolStack

CLEAR = (Form.PLAINTEXT.value, Form.AGGREGATE.value)


@dataclass(frozen=True)
class LedgerRow:
    """One message tag of a run.

    Args:
        tag (str): The message tag.
        senders (tuple[str, ...]): Parties that sent it.
        clear_readers (tuple[str, ...]): Parties that received it as plaintext or aggregate.
        protected (Mapping[str, tuple[str, ...]]): Form -> parties that received it only so and
            read nothing of it.
        bytes_by_form (Mapping[str, int]): Payload bytes per form.
        envelopes (int): Envelope copies (one per receiver).
        rounds (int): Distinct rounds it appeared in.
        opened_by (tuple[str, ...]): Parties that received it only protected and read it by
            declaration of its mechanism (unsealing, decrypting or unmasking).
        aggregate_only (tuple[str, ...]): Readers (clear or opened) that read only an aggregate.
        undeclared (tuple[str, ...]): Clear readers whose reading the mechanism does not declare.
        mechanism (str): The mechanism the stack bound the tag to.
    """

    tag: str
    senders: tuple[str, ...]
    clear_readers: tuple[str, ...]
    protected: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    bytes_by_form: Mapping[str, int] = field(default_factory=dict)
    envelopes: int = 0
    rounds: int = 0
    opened_by: tuple[str, ...] = ()
    aggregate_only: tuple[str, ...] = ()
    undeclared: tuple[str, ...] = ()
    mechanism: str = ""

    @property
    def bytes(self) -> int:
        return sum(self.bytes_by_form.values())

    @property
    def readers(self) -> tuple[str, ...]:
        """Every party that reads the tag (in the clear or by opening it)."""
        return tuple(sorted({*self.clear_readers, *self.opened_by}, key=_party_key))

    def to_dict(self) -> dict[str, Any]:
        return {"tag": self.tag, "senders": list(self.senders), "clear_readers": list(self.clear_readers),
                "protected": {k: list(v) for k, v in self.protected.items()}, "bytes_by_form": dict(self.bytes_by_form),
                "bytes": self.bytes, "envelopes": self.envelopes, "rounds": self.rounds, "opened_by": list(self.opened_by),
                "aggregate_only": list(self.aggregate_only), "undeclared": list(self.undeclared),
                "mechanism": self.mechanism}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LedgerRow:
        return cls(str(d["tag"]), tuple(d["senders"]), tuple(d["clear_readers"]),
                   {k: tuple(v) for k, v in d["protected"].items()}, {k: int(v) for k, v in d["bytes_by_form"].items()},
                   int(d["envelopes"]), int(d["rounds"]), tuple(d.get("opened_by", ())),
                   tuple(d.get("aggregate_only", ())), tuple(d.get("undeclared", ())), str(d.get("mechanism", "")))


def tag_exposure(stack: ProtocolStack, tag: str, kinds: Mapping[str, ExchangeKind]) -> tuple[str, Exposure, dict[str, Any]]:
    """The mechanism ``stack`` binds ``tag`` to, its declared exposure and the binding's parameters.

    Args:
        stack (ProtocolStack): The run's stack.
        tag (str): A message tag of the run.
        kinds (Mapping[str, ExchangeKind]): The method's tags and their exchange kinds
            (``Method.TAGS``); a tag missing there is resolved when its mechanism carries one kind.

    Raises:
        ConfigError: The tag's exchange kind is unknown, or its mechanism declares no exposure.
        UnboundTagError: The stack does not bind the tag.
    """
    binding = stack.binding_for(tag)
    kind = kinds.get(tag)
    if kind is None:
        carried = sorted(mechanism_class(binding.mechanism).exchanges, key=lambda k: k.value)
        if len(carried) != 1:
            raise ConfigError(f"the ledger needs the exchange kind of {tag!r} (its mechanism {binding.mechanism!r} "
                              f"carries {[k.value for k in carried]}); pass the method's TAGS as kinds")
        kind = carried[0]
    params = dict(binding.params)
    return binding.mechanism, exposure_of(binding.mechanism, kind, params), params


def exposure_ledger(transcript: Transcript | Iterable[Any], *, stack: ProtocolStack,
                    kinds: Mapping[str, ExchangeKind]) -> tuple[LedgerRow, ...]:
    """The ledger of a run, one row per tag, sorted by tag.

    Args:
        transcript (Transcript | Iterable[Record]): The run's transcript (metadata suffices).
        stack (ProtocolStack): The stack the run used: its mechanisms declare who reads.
        kinds (Mapping[str, ExchangeKind]): The method's tags and exchange kinds (``Method.TAGS``).

    Raises:
        ConfigError: A tag's mechanism declares no exposure, or its kind cannot be told.
    """
    records = list(transcript)
    parties = {r.sender for r in records} | {r.receiver for r in records}
    senders: dict[str, set[str]] = defaultdict(set)
    received: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # tag -> party -> forms
    nbytes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    count: dict[str, int] = defaultdict(int)
    rounds: dict[str, set[int]] = defaultdict(set)
    for r in records:
        senders[r.tag].add(r.sender)
        received[r.tag][r.receiver].add(r.form.value)
        nbytes[r.tag][r.form.value] += r.payload_bytes
        count[r.tag] += 1
        rounds[r.tag].add(r.round)
    rows = []
    for tag in sorted(count):
        mechanism, exposure, params = tag_exposure(stack, tag, kinds)
        clear: set[str] = set()
        opened: set[str] = set()
        aggregate: set[str] = set()
        undeclared: set[str] = set()
        prot: dict[str, set[str]] = defaultdict(set)
        for party, forms in received[tag].items():
            declared = reading(exposure, roles_of(party, parties=parties, params=params))
            readable = forms & set(CLEAR)
            if readable:
                clear.add(party)
                if declared not in READS:
                    undeclared.add(party)
            elif declared in READS:
                opened.add(party)
            else:
                for f in forms:
                    prot[f].add(party)
                continue
            if declared is Form.AGGREGATE or (declared not in READS and readable == {Form.AGGREGATE.value}):
                aggregate.add(party)
        rows.append(LedgerRow(
            tag, _sorted(senders[tag]), _sorted(clear), {f: _sorted(p) for f, p in sorted(prot.items())},
            dict(nbytes[tag]), count[tag], len(rounds[tag]), _sorted(opened), _sorted(aggregate), _sorted(undeclared),
            mechanism))
    return tuple(rows)


def _sorted(parties: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(parties, key=_party_key))


def clear_to(rows: Iterable[LedgerRow], parties: Iterable[str]) -> list[str]:
    """Tags some of ``parties`` read in the clear (what this adversary can decode)."""
    mine = set(parties)
    return [r.tag for r in rows if mine & set(r.clear_readers)]


def opened_by(rows: Iterable[LedgerRow], parties: Iterable[str]) -> list[str]:
    """Tags some of ``parties`` receive only protected and read by opening them (unsealing,
    decrypting or unmasking: they hold the keys)."""
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


__all__ = ["LedgerRow", "clear_to", "compress_parties", "exposure_ledger", "opened_by", "tag_exposure"]

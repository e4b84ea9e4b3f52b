"""What every Flower-vs-in-process test checks: the same parties ran, the same traffic went."""

from collections import Counter
from pathlib import Path
from typing import Any

from securefg.federation.transcript import Record, Transcript, load_jsonl


def transcripts(work: Path, ip: dict[str, Any]) -> tuple[Transcript, Transcript]:
    """The Flower run's merged transcript (from its work folder) and the in-process run's."""
    flower = Transcript()
    load_jsonl(work / "transcript.jsonl", flower)
    return flower, ip["_federation"].transcript


def record_counts(tr: Transcript) -> Counter[tuple[Any, ...]]:
    """How many envelopes of each (round, tag, stage, sender, receiver, form, payload size)."""

    def key(r: Record) -> tuple[Any, ...]:
        return (r.round, r.tag, r.stage, r.sender, r.receiver, r.form, r.payload_bytes)

    return Counter(map(key, tr))


def assert_same_traffic(fl: dict[str, Any], ip: dict[str, Any]) -> None:
    """Identical envelope counts and byte totals (no CKKS on the stack: every size is fixed)."""
    for key in ("envelopes", "bytes_by_tag", "wire_bytes_total", "communication_rounds"):
        assert fl[key] == ip[key], key


def assert_every_party_exited(fl: dict[str, Any], parties: list[str]) -> None:
    """Every party's process exited 0 and none dropped out."""
    assert fl["flower"]["processes"] == {p: 0 for p in parties}
    assert fl["flower"]["dropped"] == {}

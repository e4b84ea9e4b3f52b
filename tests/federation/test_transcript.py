import torch

from securefg.federation.envelope import Envelope, Form
from securefg.federation.exchange import Exchange
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.transcript import Transcript, load_jsonl
from securefg.federation.transport import InProcessTransport
from securefg.protocol.stack import ProtocolStack


def _fed(n=3):
    parties = {SERVER: Party(SERVER), **{client_id(k): Party(client_id(k)) for k in range(n)}}
    t = InProcessTransport(parties, transcript=Transcript(keep_payloads=True))
    return parties, t, Exchange(transport=t, stack=ProtocolStack.load("plaintext"), parties=parties)


def test_byte_accounting_equals_sum_of_payload_sizes():
    _parties, t, ex = _fed()
    ex.round = 0
    ex.broadcast("m", {"w": torch.ones(7, 3)})
    ex.aggregate("u", {c: {"w": torch.randn(5)} for c in ex.clients})
    payloads = [r.payload for r in t.transcript]
    assert t.transcript.bytes_total() == sum(len(p) for p in payloads)
    assert sum(t.transcript.bytes_by_tag().values()) == t.transcript.bytes_total()
    sent = sum(v["sent"] for v in t.transcript.bytes_by_party().values())
    assert sent == t.transcript.bytes_total()
    assert t.transcript.bytes_total(wire=True) > t.transcript.bytes_total()  # AEAD + header overhead


def test_broadcast_is_counted_once_per_receiver():
    _parties, t, ex = _fed(4)
    ex.round = 0
    ex.broadcast("m", {"w": torch.ones(10)})
    recs = t.transcript.records(tag="m")
    assert len(recs) == 4 and len({r.receiver for r in recs}) == 4


def test_communication_rounds_count_direction_changes():
    tr = Transcript()
    for s, r in [("server", "client/0"), ("server", "client/1"), ("client/0", "server"), ("client/1", "server"), ("server", "client/0")]:
        tr.append(round=0, tag="t", stage="", sender=s, receiver=r, form=Form.PLAINTEXT, payload=b"x", wire_bytes=1)
    assert tr.communication_rounds() == 3


def test_views_contain_only_what_a_party_received():
    _parties, t, ex = _fed()
    ex.round = 0
    ex.aggregate("u", {c: {"w": torch.randn(5)} for c in ex.clients})
    assert {r.receiver for r in t.transcript.view(SERVER)} == {SERVER}
    assert t.transcript.view("client/0") == []


def test_jsonl_round_trip_keeps_byte_counts(tmp_path):
    _parties, t, ex = _fed()
    ex.round = 0
    ex.broadcast("m", {"w": torch.ones(3)})
    t.transcript.save_jsonl(tmp_path / "t.jsonl")
    tr2 = Transcript()
    assert load_jsonl(tmp_path / "t.jsonl", tr2) == len(t.transcript)
    assert tr2.bytes_by_tag() == t.transcript.bytes_by_tag()


def test_kept_payload_is_exactly_what_was_sent():
    parties = ["server", "client/0"]
    t = InProcessTransport(parties, transcript=Transcript(keep_payloads=["keep/*"]))
    t.send(Envelope("client/0", ("server",), 0, "keep/a", b"abc"))
    t.send(Envelope("client/0", ("server",), 0, "drop", b"xyz"))
    recs = list(t.transcript)
    assert recs[0].payload == b"abc" and recs[1].payload is None

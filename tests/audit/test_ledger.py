"""The exposure ledger and the adversary's view, from real transcripts (plaintext vs secure sum)."""

from __future__ import annotations

import pytest

from securefg.attacks.view import AdversaryView
from securefg.audit.ledger import clear_to, compress_parties, exposure_ledger
from securefg.federation.envelope import Form
from tests.attacks.conftest import make_node_task, run_method


@pytest.fixture(scope="module")
def runs():
    task = make_node_task()
    return {s: run_method(task, "fedavg", s, rounds=2, hidden=8) for s in ("plaintext", "fedavg_secure_sum")}


def test_plaintext_updates_are_read_in_the_clear_by_the_server_only(runs):
    rows = {r.tag: r for r in exposure_ledger(runs["plaintext"]["_federation"].transcript)}
    up = rows["fedavg/update"]
    assert up.clear_readers == ("server",) and not up.protected
    assert up.senders == ("client/0", "client/1", "client/2", "client/3")
    assert up.envelopes == 8 and up.rounds == 2 and up.bytes == up.bytes_by_form["plaintext"] > 0
    assert rows["fedavg/model"].clear_readers == ("client/0", "client/1", "client/2", "client/3")


def test_under_secure_sum_nobody_reads_an_update_and_the_server_holds_masked_bytes(runs):
    ledger = exposure_ledger(runs["fedavg_secure_sum"]["_federation"].transcript)
    rows = {r.tag: r for r in ledger}
    up = rows["fedavg/update"]
    assert up.clear_readers == ()
    assert "server" in up.protected["masked"] and "keys" in up.protected
    assert clear_to(ledger, ["server"]) == []
    assert clear_to(ledger, ["client/0"]) == ["fedavg/model"]


def test_the_ledger_bytes_add_up_to_the_transcript(runs):
    tr = runs["fedavg_secure_sum"]["_federation"].transcript
    assert sum(r.bytes for r in exposure_ledger(tr)) == tr.bytes_total()


def test_an_adversary_view_holds_what_it_received_and_sent_and_decodes_only_readable_forms(runs):
    fed = runs["fedavg_secure_sum"]["_federation"]
    view = AdversaryView(fed.transcript, ["server"], fed.parties)
    sent = view.records("fedavg/model", received=False)
    assert sent and all(r.sender == "server" for r in sent)  # its own broadcasts
    assert view.decode(sent[0]) is not None
    masked = view.records("fedavg/update", form=Form.MASKED, received=True)
    assert masked and all(view.decode(r) is None for r in masked)


def test_own_state_opens_only_for_adversary_members(runs):
    fed = runs["plaintext"]["_federation"]
    view = AdversaryView(fed.transcript, ["client/0"], fed.parties)
    assert view.own_state("client/0", "model") is not None
    with pytest.raises(PermissionError, match="client/1 is not part of the adversary"):
        view.own_state("client/1", "model")


def test_party_lists_are_compressed_for_the_report() -> None:
    assert compress_parties(["client/2", "server", "client/0", "client/1", "client/5"]) == "server, client/0..2, client/5"
    assert compress_parties([]) == "nobody"


def test_a_tag_at_round_pattern_keeps_only_that_rounds_payloads():
    from securefg.federation.envelope import Form
    from securefg.federation.transcript import Transcript

    t = Transcript(["bulk@-3", "small"])
    for r in (-3, -2, 0):
        for tag in ("bulk", "small"):
            t.append(round=r, tag=tag, stage="", sender="a", receiver="b", form=Form.PLAINTEXT, payload=b"xy", wire_bytes=2)
    kept = {(rec.tag, rec.round) for rec in t if rec.payload is not None}
    assert kept == {("bulk", -3), ("small", -3), ("small", -2), ("small", 0)}

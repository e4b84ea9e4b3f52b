"""The exposure ledger and the adversary's view, from real transcripts (plaintext vs secure sum)."""

from __future__ import annotations

import pytest

from securefg.attacks.view import AdversaryView
from securefg.audit.ledger import LedgerRow, clear_to, compress_parties, exposure_ledger, opened_by
from securefg.federation.envelope import Form
from securefg.methods.base import method_class
from tests.attacks.conftest import make_node_task, run_method

KINDS = method_class("fedavg").TAGS


@pytest.fixture(scope="module")
def runs():
    task = make_node_task()
    return {s: run_method(task, "fedavg", s, rounds=2, hidden=8) for s in ("plaintext", "fedavg_secure_sum")}


def ledger_of(run):
    return exposure_ledger(run["_federation"].transcript, stack=run["_stack"], kinds=KINDS)


def test_plaintext_updates_are_read_in_the_clear_by_the_server_only(runs):
    rows = {r.tag: r for r in ledger_of(runs["plaintext"])}
    up = rows["fedavg/update"]
    assert up.clear_readers == ("server",) and not up.protected and up.aggregate_only == () and up.opened_by == ()
    assert up.senders == ("client/0", "client/1", "client/2", "client/3")
    assert up.envelopes == 8 and up.rounds == 2 and up.bytes == up.bytes_by_form["plaintext"] > 0
    assert rows["fedavg/model"].clear_readers == ("client/0", "client/1", "client/2", "client/3")


def test_under_secure_sum_nobody_reads_an_update_and_the_server_reads_only_the_sum_it_unmasks(runs):
    ledger = ledger_of(runs["fedavg_secure_sum"])
    rows = {r.tag: r for r in ledger}
    up = rows["fedavg/update"]
    assert up.clear_readers == () and up.mechanism == "secure_sum"
    assert up.opened_by == up.aggregate_only == ("server",)  # the sum, from masked inputs and unmasking shares
    assert up.protected["masked"] == ("client/0", "client/1", "client/2", "client/3")  # key-share bundles
    assert clear_to(ledger, ["server"]) == [] and opened_by(ledger, ["server"]) == ["fedavg/metrics", "fedavg/update"]
    assert clear_to(ledger, ["client/0"]) == ["fedavg/model"] and opened_by(ledger, ["client/0"]) == []


def test_the_ledger_bytes_add_up_to_the_transcript(runs):
    tr = runs["fedavg_secure_sum"]["_federation"].transcript
    assert sum(r.bytes for r in ledger_of(runs["fedavg_secure_sum"])) == tr.bytes_total()


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


def test_a_ledger_row_round_trips_through_json_and_reads_an_old_report_without_the_new_fields(runs):
    for row in ledger_of(runs["fedavg_secure_sum"]):
        assert LedgerRow.from_dict(row.to_dict()) == row
    old = {"tag": "t", "senders": ["client/0"], "clear_readers": [], "protected": {"masked": ["server"]},
           "bytes_by_form": {"masked": 3}, "envelopes": 1, "rounds": 1, "opened_by": []}
    row = LedgerRow.from_dict(old)
    assert row.aggregate_only == row.undeclared == () and row.mechanism == ""

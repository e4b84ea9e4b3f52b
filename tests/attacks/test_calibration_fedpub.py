"""Calibration on FED-PUB: update probes win in plaintext and read nothing under CKKS; the
similarity the server learns by design gives away which clients hold alike labels on both stacks."""

from __future__ import annotations

import pytest

from tests.attacks.conftest import make_node_task, play, run_method, threat


@pytest.fixture(scope="module")
def task():
    return make_node_task(clients=6)


@pytest.fixture(scope="module")
def runs(task):
    return {stack: run_method(task, "fedpub", stack, rounds=4) for stack in ("plaintext", "fedpub_ckks")}


def _ran(results, key):
    r = results[key]
    assert r.status == "ran", r.reason
    return r.outcome


def test_label_inference_reads_individual_models_in_plaintext_and_nothing_under_ckks(task, runs):
    tm = threat(["server"], {"label_inference": {"rounds": [0]}})
    plain = _ran(play(tm, runs["plaintext"], task), "label_inference")
    ckks = _ran(play(tm, runs["fedpub_ckks"], task), "label_inference")
    assert plain.details["estimate"] == ["individual"] and plain.value >= 0.8
    assert ckks.details["estimate"] == ["none"] and ckks.value == pytest.approx(0.5)


def test_link_stealing_needs_a_model_the_server_only_reads_in_plaintext(task, runs):
    tm = threat(["server"], {"link_stealing": {"pairs": 600}}, target_features=True)
    plain = _ran(play(tm, runs["plaintext"], task), "link_stealing")
    # it reads each client's own round-0 model (only that round's uploads are kept: every round's would
    # not fit in memory), one Adam step from the shared initialisation, so it barely beats the features
    assert plain.details["model"] == ["local"] and plain.value > 0.5
    assert play(tm, runs["fedpub_ckks"], task)["link_stealing"].status == "skipped"


def test_community_inference_is_a_by_design_leak_on_both_stacks(task, runs):
    tm = threat(["server"], {"community_inference": {}})
    plain = _ran(play(tm, runs["plaintext"], task), "community_inference")
    ckks = _ran(play(tm, runs["fedpub_ckks"], task), "community_inference")
    assert plain.value >= 0.7  # label-skewed clients: the weights pair up the alike ones
    assert ckks.value == pytest.approx(plain.value, abs=1e-6)  # CKKS hides embeddings, not their similarity
    client = threat(["client/0"], {"community_inference": {}})
    assert play(client, runs["fedpub_ckks"], task)["community_inference"].status == "skipped"


def test_a_curious_client_attacks_with_its_own_decrypted_mix_on_every_stack(task, runs):
    tm = threat(["client/0"], {"link_stealing": {"pairs": 600}}, target_features=True)
    plain = _ran(play(tm, runs["plaintext"], task), "link_stealing")
    ckks = _ran(play(tm, runs["fedpub_ckks"], task), "link_stealing")
    assert plain.details["model"] == ["own personalised mix"]
    # the client decrypts the same mix under CKKS (it must, to train): the stacks cannot differ
    assert ckks.value == pytest.approx(plain.value, abs=0.02)
    assert plain.value != pytest.approx(0.5, abs=1e-3)  # a trained model's posteriors, not a constant

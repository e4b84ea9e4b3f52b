"""Calibration of the malicious-client attacks on FedAvg: damage, and which defence composes where."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attacks.conftest import play, run_method, threat

ROUNDS = 15


def _rerun(task, stack):
    def rerun(method=None, protocol=None):
        return run_method(task, method or "fedavg", protocol or stack, rounds=ROUNDS, keep=False)

    return rerun


@pytest.fixture(scope="module")
def poisoned(node_task, fedavg_plain, fedavg_secure, tmp_path_factory):
    tm = threat(["client/0"], {"update_poisoning": {"behaviour": "sign_flip", "factor": 10.0,
                                                    "defences": ["clip_norm", "trimmed_mean"]}}, behaviour="malicious")
    work: Path = tmp_path_factory.mktemp("stacks")
    plain = play(tm, fedavg_plain, node_task, rerun=_rerun(node_task, "plaintext"), workdir=work)["update_poisoning"]
    secure = play(tm, fedavg_secure, node_task, rerun=_rerun(node_task, "fedavg_secure_sum"), workdir=work)["update_poisoning"]
    return plain, secure


def test_sign_flipped_updates_hurt_honest_clients_under_both_stacks(poisoned):
    plain, secure = poisoned
    assert plain.status == "ran" and secure.status == "ran", (plain.reason, secure.reason)
    assert plain.outcome.value >= 0.3
    assert secure.outcome.value >= 0.3  # a masked sum cannot see the poisoned input


def test_norm_bounding_composes_with_secure_sum_and_trimmed_mean_only_with_plaintext(poisoned):
    plain, secure = poisoned
    pd = {d["defence"]: d for d in plain.outcome.details["defences"]}
    sd = {d["defence"]: d for d in secure.outcome.details["defences"]}
    assert pd["clip_norm"]["composable"] and sd["clip_norm"]["composable"]
    assert pd["trimmed_mean"]["composable"]
    assert not sd["trimmed_mean"]["composable"] and "hides individual" in sd["trimmed_mean"]["reason"]
    assert sd["clip_norm"]["accuracy_drop"] < secure.outcome.value / 2
    assert pd["trimmed_mean"]["accuracy_drop"] < plain.outcome.value / 2


def test_malformed_payloads_are_all_refused_with_typed_errors(node_task, fedavg_plain):
    tm = threat(["client/0"], {"malformed_payloads": {}}, behaviour="malicious")
    r = play(tm, fedavg_plain, node_task)["malformed_payloads"]
    assert r.status == "ran"
    assert r.outcome.value == 0.0, r.outcome.details["probes"]
    assert r.outcome.details["untyped"] == 0, r.outcome.details["probes"]

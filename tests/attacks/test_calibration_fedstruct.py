"""Calibration of every attack that applies to the real FedStruct method (variant B, Hop2Vec).

One run per stack on the label-skewed 400-node task, Ā = Â³ (β = e_3, the method's default
form, which the structure attack could not peel: it returned NaN before). Measured (seed 0, 10
rounds): structure_link 0.98 plaintext (each peer's hop-2 message) / 0.91 secure (own Ā rows);
nsf_link about 0.88 for the clients under both and for the plaintext server (the summed ∇S), chance
for the fedstruct_secure server (blind_sum hides the sum from it); link_stealing about
0.84 under both (θ is broadcast), prior 0.69; the server's label_inference 1.0 / 0.5 and
feature_support 0.84 / 0.5 (individual gradients vs the sum only).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.attacks.conftest import play, run_method, threat

OPTIONS = {"variant": "B", "nsf": "hop2vec", "structure_hops": 3, "structure_dim": 16}
ROUNDS = 10
CLIENT = {"structure_link": {"pairs": 1000}, "nsf_link": {"pairs": 1000}, "link_stealing": {"pairs": 1000},
          "label_inference": {}}
SERVER = {"nsf_link": {"pairs": 1000}, "link_stealing": {"pairs": 1000}, "label_inference": {}, "feature_support": {}}


def _run(task: Any, stack: str, rounds: int = ROUNDS, **options: Any) -> dict[str, Any]:
    return run_method(task, "fedstruct", stack, rounds=rounds, options={**OPTIONS, **options}, lr=0.01,
                      weight_decay=5e-4)


@pytest.fixture(scope="module")
def runs(node_task: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for stack in ("plaintext", "fedstruct_secure"):
        r = _run(node_task, stack)
        out[stack] = {"client": play(threat(["client/0"], CLIENT, target_features=True), r, node_task),
                      "server": play(threat(["server"], SERVER, target_features=True), r, node_task)}
    return out


def _value(runs: dict[str, Any], stack: str, who: str, key: str) -> Any:
    res = runs[stack][who][key]
    assert res.status == "ran", res.reason
    return res.outcome


def test_structure_link_reads_peer_messages_in_plaintext_and_the_own_rows_behind_a_secure_sum(runs):
    plain = _value(runs, "plaintext", "client", "structure_link")
    secure = _value(runs, "fedstruct_secure", "client", "structure_link")
    assert plain.details["source"] == "individual" and plain.value >= 0.95
    # Ā = Â³ cannot be peeled (β2 = 0); the rows themselves rank the remote neighbourhood
    assert secure.details["source"] == "own result (sum), rows as proximity"
    assert secure.value >= 0.8


def test_the_summed_nsf_gradient_reveals_edges_to_clients_and_to_the_server_only_when_it_is_not_blind(runs):
    for stack, who in (("plaintext", "client"), ("plaintext", "server"), ("fedstruct_secure", "client")):
        out = _value(runs, stack, who, "nsf_link")
        assert out.details["source"] == "summed NSF gradients"
        assert out.value >= 0.8, (stack, who, out.value)
    # blind_sum: the client opens the blinded sum with its group key and attacks as well as in plaintext
    assert abs(_value(runs, "fedstruct_secure", "client", "nsf_link").value
               - _value(runs, "plaintext", "client", "nsf_link").value) < 0.05
    blind = _value(runs, "fedstruct_secure", "server", "nsf_link")
    assert blind.details.get("blind") is True and blind.value == 0.5


def test_link_stealing_uses_the_broadcast_model_so_the_stacks_cannot_differ(runs):
    plain = _value(runs, "plaintext", "client", "link_stealing")
    secure = _value(runs, "fedstruct_secure", "client", "link_stealing")
    assert plain.value >= 0.8 and plain.details["advantage"] > 0.1
    assert abs(plain.value - secure.value) < 0.02  # θ differs only by the secure sum's fixed-point rounding


def test_the_server_reads_labels_and_vocabularies_from_individual_gradients_only_in_plaintext(runs):
    for key in ("label_inference", "feature_support"):
        plain = _value(runs, "plaintext", "server", key)
        secure = _value(runs, "fedstruct_secure", "server", key)
        assert plain.value >= 0.8 and plain.details["estimate"] == ["individual"], (key, plain.value)
        assert secure.value == 0.5 and secure.details["estimate"] == ["mean"], (key, secure.value)
    # a client never sees another client's gradient: the consecutive broadcasts give the mean only
    assert _value(runs, "plaintext", "client", "label_inference").value == 0.5


def test_the_hardened_variant_shares_neither_nsf_rows_nor_their_gradient(node_task):
    r = _run(node_task, "plaintext", rounds=3, hardened=True)  # no ∇S broadcast under any stack
    out = play(threat(["client/0"], {"nsf_link": {"pairs": 1000}}), r, node_task)["nsf_link"]
    assert out.status == "ran" and out.outcome.details.get("blind") and out.outcome.value == 0.5


@pytest.fixture(scope="module")
def poisoned(node_task: Any, tmp_path_factory: Any) -> Any:
    stack = "fedstruct_secure"

    def rerun(method: str | None = None, protocol: str | None = None) -> dict[str, Any]:
        return run_method(node_task, method or "fedstruct", protocol or stack, rounds=ROUNDS, keep=False,
                          options=OPTIONS, lr=0.01, weight_decay=5e-4)

    tm = threat(["client/0"], {"update_poisoning": {"behaviour": "sign_flip", "factor": 10.0,
                                                    "defences": ["clip_norm", "trimmed_mean"]}}, behaviour="malicious")
    base = _run(node_task, stack)
    return play(tm, base, node_task, rerun=rerun, workdir=tmp_path_factory.mktemp("stacks"))["update_poisoning"]


def test_a_sign_flipped_gradient_hides_in_the_masked_sum_and_a_norm_bound_composes(poisoned):
    assert poisoned.status == "ran", poisoned.reason
    assert poisoned.outcome.value >= 0.3, poisoned.outcome.details
    rows = {d["defence"]: d for d in poisoned.outcome.details["defences"]}
    assert not rows["trimmed_mean"]["composable"] and "hides individual" in rows["trimmed_mean"]["reason"]
    assert rows["clip_norm"]["composable"]
    assert rows["clip_norm"]["accuracy_drop"] < poisoned.outcome.value / 2, rows["clip_norm"]
    # on this task the bound costs little accuracy (on Cora it costs 14 points: weight decay dominates)
    assert rows["clip_norm"]["clean_accuracy"] > 0.8


def test_spoofed_nsf_rows_are_screened_out_by_every_honest_receiver(node_task, tmp_path):
    from securefg.attacks.crafted_nsf import crafted_item
    from securefg.attacks.malicious import malicious_uploads

    opts = {**OPTIONS, "nsf": "degree"}
    n = int(node_task.full_graph.num_nodes)

    def rerun(method: str | None = None, protocol: str | None = None) -> dict[str, Any]:
        return run_method(node_task, method or "fedstruct", protocol or "plaintext", rounds=3, keep=False,
                          options=opts, lr=0.01, weight_decay=5e-4)

    spoof = malicious_uploads("fedstruct", "test_spoof", ["client/0"], "fedstruct/nsf", op="relay",
                              poison=lambda b: crafted_item(b, behaviour="spoof", factor=100.0, num_nodes=n, seed=1))
    honest = {pid: p.state for pid, p in rerun(spoof)["_federation"].parties.items()
              if pid != "client/0" and pid.startswith("client/")}
    honest_rows = node_task.clients[1].global_id
    # degree NSFs are one-hot; the spoofed item (N(0, 100^2) rows at every id) claims each
    # receiver's own nodes, so every honest receiver drops it whole and no crafted row gets in
    assert all(float(st["structure"][honest_rows].abs().max()) <= 1.0 for st in honest.values())
    assert all(st["nsf_screen"]["items_dropped"] == 1 for st in honest.values())
    tm = threat(["client/0"], {"crafted_nsf": {"behaviour": "spoof", "factor": 100.0}}, behaviour="malicious")
    out = play(tm, rerun(), node_task, rerun=rerun, workdir=tmp_path)["crafted_nsf"]
    assert out.status == "ran", out.reason
    d = out.outcome.details
    assert out.outcome.value == pytest.approx(d["clean_accuracy"] - d["crafted_accuracy"])
    assert d["defences"][0]["implemented"] is True
    assert all(s["items_dropped"] == 1 for s in d["screen"].values())


def test_the_poisoning_variant_also_poisons_the_server_blind_nsf_gradient(node_task):
    """Since ∇S rides its own ``shared_sum`` (``fedstruct/nsf_grad``), a sign-flip client must
    flip it there too, or the attack would silently poison θ only."""
    from securefg.attacks.malicious import malicious_uploads
    from securefg.attacks.poisoning import ALSO_POISONED, GRADIENT_UPLOADS
    from securefg.federation.program.exchange import ClientExchange

    # what each client hands the shared_sum in round 0 (after any deviation, before the mechanism)
    seen: dict[str, list[Any]] = {"honest": [{}], "poisoned": [{}]}
    original = ClientExchange.deviate

    def recording(self: ClientExchange, kind: str, tag: str, value: Any) -> Any:
        out = original(self, kind, tag, value)
        if (kind, tag) == ("shared_sum", "fedstruct/nsf_grad"):
            seen[recording.mode][0].setdefault(self.rt.party.pid, dict(out))  # type: ignore[attr-defined]
        return out

    flip = malicious_uploads("fedstruct", "test_flip_nsf", ["client/0"], GRADIENT_UPLOADS["fedstruct"],
                             lambda x: {k: -10.0 * v for k, v in dict(x).items()}, also=ALSO_POISONED["fedstruct"])
    ClientExchange.deviate = recording  # type: ignore[method-assign]
    try:
        for mode, method in (("honest", "fedstruct"), ("poisoned", flip)):
            recording.mode = mode  # type: ignore[attr-defined]
            run_method(node_task, method, "plaintext", rounds=1, keep=False, options=OPTIONS, lr=0.01, weight_decay=5e-4)
    finally:
        ClientExchange.deviate = original  # type: ignore[method-assign]
    honest, poisoned = seen["honest"][0], seen["poisoned"][0]
    for key, value in honest["client/0"].items():
        assert torch.allclose(poisoned["client/0"][key], -10.0 * value)
    for key, value in honest["client/1"].items():
        assert torch.equal(poisoned["client/1"][key], value)

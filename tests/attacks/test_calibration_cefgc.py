"""Calibration on CeFGC: membership inference on relayed generators, the CeFGC+ partner leak, a
spoofed generator, under the plaintext relay and the sealed relay (``protocols/cefgc.toml``).

Small graphs of two structural families (random trees, dense random graphs) with sizes spread
over 6..40 nodes, 4 training graphs per class per client: tiny training sets, as in CeFGC on
MUTAG (cefgc.md §5: "the data are tiny"). At this size and training budget the score network
does not memorise individual graphs (``dsm_only_auc`` stays near chance, also in
``test_diffusion_membership.py``); the membership signal is the size histogram every model
ships, which the DP counterfactual noises.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch_geometric.data import Data

from securefg.data.synthetic import make_graph_classification
from securefg.experiment_data import degree_features, max_degree
from securefg.methods.tasks import GraphTask
from tests.attacks.conftest import play, run_method, threat

FAST = {"diffusion_epochs": 20, "diffusion_batch": 8, "diffusion_lr": 5e-3, "langevin_steps": 3, "gnn_epochs": 8,
        "max_nodes": 40, "synthetic_ratio": 1.0}


def _graph_task() -> GraphTask:
    raw = make_graph_classification(num_graphs=210, num_classes=3, min_nodes=6, max_nodes=40, seed=0)
    graphs = [Data(x=g.x, edge_index=g.edge_index, y=g.y - 1, num_nodes=g.num_nodes) for g in raw if int(g.y) > 0]
    cap = min(max_degree(graphs), 12)
    graphs = degree_features(graphs, cap)
    train = [graphs[8 * k: 8 * (k + 1)] for k in range(3)]  # 4 per class per client (labels alternate)
    val = [graphs[24 + 4 * k: 28 + 4 * k] for k in range(3)]
    test = [graphs[36 + 8 * k: 44 + 8 * k] for k in range(3)]
    return GraphTask(train=train, val=val, test=test, global_test=graphs[60:], num_features=cap + 1, num_classes=2)


@pytest.fixture(scope="module")
def graph_task() -> GraphTask:
    return _graph_task()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: Any) -> str:
    return str(tmp_path_factory.mktemp("generators"))


@pytest.fixture(scope="module")
def cefgc_plain(graph_task: GraphTask, cache: str) -> dict[str, Any]:
    return run_method(graph_task, "cefgc", "plaintext", rounds=1, lr=1e-3, weight_decay=5e-4,
                      options={**FAST, "generator_cache": cache})


@pytest.fixture(scope="module")
def cefgc_sealed(graph_task: GraphTask, cache: str, cefgc_plain: dict[str, Any]) -> dict[str, Any]:
    # same seed and cache: the phase-1 generators are the plaintext run's, only the relay differs
    return run_method(graph_task, "cefgc", "cefgc", rounds=1, lr=1e-3, weight_decay=5e-4,
                      options={**FAST, "generator_cache": cache})


def _mia(reference: str, **extra: Any) -> dict[str, Any]:
    return {"diffusion_membership": {"reference": reference, "draws": 4, **extra}}


def test_curious_server_reads_plaintext_generators_and_is_blind_behind_the_sealed_relay(graph_task, cefgc_plain, cefgc_sealed):
    tm = threat(["server"], _mia("aux"), aux_graphs=0.4)
    plain = play(tm, cefgc_plain, graph_task)["diffusion_membership"]
    sealed = play(tm, cefgc_sealed, graph_task)["diffusion_membership"]
    assert plain.status == "ran" and sealed.status == "ran", (plain.reason, sealed.reason)
    assert plain.outcome.details["models"] == 6
    assert plain.outcome.value >= 0.8
    assert sealed.outcome.details.get("blind") and sealed.outcome.value == 0.5


def test_a_curious_client_infers_membership_under_both_relays_and_dp_training_brings_it_to_chance(
        graph_task, cefgc_plain, cefgc_sealed):
    tm = threat(["client/0"], _mia("aux", dp_noise_multipliers=[1.0], dp_histogram_sigma=4.0), aux_graphs=0.4)
    sealed = play(tm, cefgc_sealed, graph_task)["diffusion_membership"]
    plain = play(threat(["client/0"], _mia("aux"), aux_graphs=0.4), cefgc_plain, graph_task)["diffusion_membership"]
    assert sealed.status == "ran", sealed.reason
    assert sealed.outcome.details["models"] == 4  # the two other clients' per-class generators, decrypted
    # the sealed relay protects against the server, not against the recipients
    assert sealed.outcome.value >= 0.8
    assert abs(sealed.outcome.value - plain.outcome.value) < 1e-9
    # the auditor's counterfactual: DP-SGD (sigma 1) and a noisy size histogram (sigma 4)
    (dp,) = sealed.outcome.details["dp"]
    assert dp["auc"] <= 0.65 and dp["epsilon"] < 100


def test_cefgc_plus_pair_averaging_hands_a_client_its_partners_generator(graph_task, cache):
    plus = run_method(graph_task, "cefgc_plus", "plaintext", rounds=1, lr=1e-3, weight_decay=5e-4,
                      options={**FAST, "generator_cache": cache, "mix_peers": 1})  # the paper's pairs
    tm = threat(["client/0"], {"partner_recovery": {}})
    r = play(tm, plus, graph_task)["partner_recovery"]
    assert r.status == "ran", r.reason
    assert r.outcome.value >= 0.999 and r.outcome.details["recovery_vs_init"] >= 0.999  # exact, up to float32
    assert r.outcome.details["best_relative_error_whole_package"] < 1e-6
    assert r.outcome.chance < 0.7  # the mixes as received are far from any single peer's training
    # the adversary's own package is a poor guess of a peer: the leak is the protocol's
    assert r.outcome.details["side_knowledge_baseline"] < 0.5


def test_cefgc_plus_group_averaging_recovers_no_peer(graph_task, cache):
    plus = run_method(graph_task, "cefgc_plus", "plaintext", rounds=1, lr=1e-3, weight_decay=5e-4,
                      options={**FAST, "generator_cache": cache})  # default: mix_peers=2, one group of 3
    r = play(threat(["client/0"], {"partner_recovery": {}}), plus, graph_task)["partner_recovery"]
    assert r.status == "ran", r.reason
    # the best candidate is the two peers' mean, nothing individual; far above CKKS noise (~1e-6)
    assert r.outcome.value < 0.01 and r.outcome.details["group_sizes_tried"] == [2, 3]
    assert r.outcome.details["best_relative_error_whole_package"] > 1e-3


def test_partner_recovery_does_not_apply_without_pair_averaging(graph_task, cefgc_sealed):
    r = play(threat(["client/0"], {"partner_recovery": {}}), cefgc_sealed, graph_task)["partner_recovery"]
    assert r.status == "skipped" and "CeFGC+" in r.reason


def test_a_spoofed_generator_reaches_every_honest_client_with_swapped_labels(graph_task, cefgc_plain, cache):
    runs = []

    def rerun(method=None, protocol=None):
        runs.append(run_method(graph_task, method or "cefgc", protocol or "plaintext", rounds=1, lr=1e-3,
                               weight_decay=5e-4, options={**FAST, "generator_cache": cache}, keep=False))
        return runs[-1]

    tm = threat(["client/0"], {"spoofed_generator": {"shift": 1}}, behaviour="malicious")
    r = play(tm, cefgc_plain, graph_task, rerun=rerun)["spoofed_generator"]
    assert r.status == "ran", r.reason
    # its size depends on how good the generators are; the receivers' screen is on by default and says so
    assert math.isfinite(r.outcome.value), r.outcome.details
    assert r.outcome.details["screen_generators"] is True and r.outcome.details["screened_out"] >= 0
    assert set(r.outcome.details["screen_excess"]) == {"client/1", "client/2"}
    # Delivery: each honest client received client 0's class-c generator declared as class c+1.
    fed = runs[-1]["_federation"]
    true = {c: m.node_count_hist for c, m in cefgc_plain["_federation"].parties["client/0"].state["generators"].items()}
    for cid in ("client/1", "client/2"):
        got = fed.parties[cid].state["received_models"]
        spoofed = [m for m in got for c, h in true.items() if torch.equal(m.node_count_hist, h) and m.class_label == (c + 1) % 2]
        assert len(spoofed) == len(true)


def test_the_ledger_shows_clients_opening_sealed_generators_the_server_only_forwards(cefgc_sealed):
    from securefg.audit.ledger import exposure_ledger
    from securefg.methods.base import method_class

    ledger = exposure_ledger(cefgc_sealed["_federation"].transcript, stack=cefgc_sealed["_stack"],
                             kinds=method_class("cefgc").TAGS)
    rows = {r.tag: r for r in ledger}
    model = rows["cefgc/model"]
    assert model.clear_readers == ()
    assert model.opened_by == ("client/0", "client/1", "client/2")
    assert "server" in model.protected["sealed"]
    weights = rows["cefgc/weights"]  # SecAgg+: the server reads only the sum it unmasks
    assert weights.clear_readers == () and weights.opened_by == weights.aggregate_only == ("server",)


def test_a_sign_flipping_client_poisons_cefgc_weights_and_the_bound_on_its_change_or_the_norm_filter_defends(
        graph_task, cache, tmp_path):
    """CeFGC uploads the change from W0, so a norm bound (clip_norm at the largest honest change)
    or the key holder's norm filter (cefgc_robust) sees the boost; trimmed mean needs plaintext."""
    opts = {**FAST, "generator_cache": cache, "gnn_epochs": 150, "gnn_patience": 0}  # a clean GIN worth damaging

    def rerun(stack: str) -> Any:
        def go(method: str | None = None, protocol: str | None = None) -> dict[str, Any]:
            return run_method(graph_task, method or "cefgc", protocol or stack, rounds=1, lr=1e-3, weight_decay=5e-4,
                              keep=False, options=opts)
        return go

    tm = threat(["client/0"], {"update_poisoning": {"behaviour": "sign_flip", "factor": 10.0,
                                                    "defences": ["clip_norm", "trimmed_mean"], "trim": 0.34}},
                behaviour="malicious")
    results = {}
    for stack in ("plaintext", "cefgc", "cefgc_robust"):
        truth = run_method(graph_task, "cefgc", stack, rounds=1, lr=1e-3, weight_decay=5e-4, options=opts)
        results[stack] = play(tm, truth, graph_task, rerun=rerun(stack), workdir=tmp_path)["update_poisoning"]
    plain, sealed, robust = results["plaintext"], results["cefgc"], results["cefgc_robust"]
    assert all(r.status == "ran" for r in results.values()), [r.reason for r in results.values()]
    for r in (plain, sealed):  # SecAgg+ hides the flipped change as well as any other
        assert r.outcome.details["clean_accuracy"] >= 0.75, r.outcome.details
        assert r.outcome.value >= 0.2, r.outcome.details
    assert robust.outcome.value <= 0.05, robust.outcome.details  # the key holder drops the boosted change
    pd = {d["defence"]: d for d in plain.outcome.details["defences"]}
    sd = {d["defence"]: d for d in sealed.outcome.details["defences"]}
    for d in (pd, sd):  # a bound on the change composes with any sum
        assert d["clip_norm"]["composable"] and d["clip_norm"]["accuracy_drop"] < plain.outcome.value / 2, d["clip_norm"]
    assert not sd["trimmed_mean"]["composable"] and "hides individual" in sd["trimmed_mean"]["reason"]
    assert pd["trimmed_mean"]["composable"]
    assert pd["trimmed_mean"]["accuracy_drop"] < plain.outcome.value / 2, pd["trimmed_mean"]

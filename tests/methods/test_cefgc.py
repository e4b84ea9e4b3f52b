"""CeFGC through the protocol layer: round structure, who sees what, HE == plaintext, the leak."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

from securefg.data.synthetic import make_graph_classification
from securefg.errors import ConfigError, SenderAuthenticationError
from securefg.experiment_data import degree_features, max_degree
from securefg.federation.envelope import Form
from securefg.federation.federation import Federation
from securefg.federation.party import SERVER
from securefg.federation.runner import RoundRunner
from securefg.methods.base import Method, MethodConfig, method_class
from securefg.methods.cefgc import TAG_MODEL, TAG_SIMILARITY, TAG_WEIGHTS, partner_recovery
from securefg.methods.tasks import GraphTask
from securefg.methods.training import TrainConfig, state_of
from securefg.protocol.ckks.public_context import PublicContext
from securefg.protocol.stack import ProtocolStack

FAST = {"diffusion_epochs": 4, "langevin_steps": 3, "tune_samples": 4, "gnn_epochs": 6, "max_nodes": 32, "synthetic_ratio": 0.5}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _task() -> GraphTask:
    graphs = make_graph_classification(num_graphs=84, num_classes=2, seed=0)
    cap = min(max_degree(graphs), 12)
    graphs = degree_features(graphs, cap)
    train = [graphs[k:54:3] for k in range(3)]
    return GraphTask(train=train, val=[graphs[54:62]] * 3, test=[graphs[62:70]] * 3, global_test=graphs[70:],
                     num_features=cap + 1, num_classes=2)


@dataclass
class Run:
    method: Method
    fed: Federation
    summary: dict[str, Any]


def _config(**options: Any) -> MethodConfig:
    return MethodConfig(rounds=1, train=TrainConfig(lr=1e-3, weight_decay=5e-4), seed=1, options={**FAST, **options})


def _run(name: str, stack: str, **options: Any) -> Run:
    method = method_class(name)(_task(), _config(**options))
    fed = Federation(3, ProtocolStack.load(stack), seed=1, extra_parties=method.extra_parties, keep_payloads=True)
    out = RoundRunner(method, fed, rounds=1, progress=False).run()
    return Run(method, fed, out.summary)


@pytest.fixture(scope="module")
def he_run() -> Run:
    return _run("cefgc_plus", "cefgc_plus")


@pytest.fixture(scope="module")
def plain_plus_run() -> Run:
    return _run("cefgc_plus", "plaintext")


def test_he_stack_takes_exactly_three_server_client_rounds(he_run: Run) -> None:
    tr = he_run.fed.transcript
    assert tr.communication_rounds() == 3
    flights = he_run.method.report()["flights"]
    assert [f["direction"] for f in flights] == ["up", "down", "up"]
    assert {k.split(" [")[0] for k in flights[0]["by_tag"]} == {TAG_MODEL, TAG_SIMILARITY}
    assert {k.split(" [")[0] for k in flights[1]["by_tag"]} == {TAG_MODEL, "cefgc/init"}
    assert {k.split(" [")[0] for k in flights[2]["by_tag"]} == {TAG_WEIGHTS}
    # the keyholder's traffic (keys, decryptions) is not server-client traffic, and nothing is lost:
    helper = sum(h["bytes"] for h in he_run.method.report()["helper_traffic"])
    assert helper > 0 and helper + sum(f["bytes"] for f in flights) == tr.bytes_total()
    rounds = he_run.method.report()["paper_rounds"]
    assert (rounds["R1_bytes"], rounds["R2_bytes"], rounds["R3_bytes"]) == tuple(f["bytes"] for f in flights)


def test_server_never_holds_a_secret_key_or_a_plaintext_diffusion_model(he_run: Run) -> None:
    server = he_run.fed.parties[SERVER]
    contexts = list(server.state["mech/ckks"]["keys"].values())
    assert len(contexts) == 2  # the relay/similarity key and the separate R3 key
    assert all(isinstance(c, PublicContext) and c.is_public() for c in contexts)
    view = he_run.fed.transcript.view(SERVER)
    for tag in (TAG_MODEL, TAG_SIMILARITY, TAG_WEIGHTS):
        forms = {r.form for r in view if r.tag == tag and r.sender.startswith("client/")}
        assert forms == {Form.CIPHERTEXT}, (tag, forms)
    model_forms = {r.form for r in view if r.tag == TAG_MODEL}
    assert model_forms <= {Form.CIPHERTEXT, Form.SEALED, Form.KEYS}
    assert "generators" not in server.state and "own_package" not in server.state


def test_r2_bundles_hold_the_other_clients_mixes_and_not_the_own_one(plain_plus_run: Run) -> None:
    fed = plain_plus_run.fed
    own = {c: fed.parties[c].state["own_package"] for c in fed.client_ids}
    partners = fed.parties[SERVER].state["partners"]
    assert all(len(p) >= 2 for p in partners.values())  # default: groups of >= 3 (here all three)
    mixes = {o: {k: sum(own[j][k].double() for j in [o, *p]) / (1 + len(p)) for k in own[o]} for o, p in partners.items()}
    for c in fed.client_ids:
        got = fed.parties[c].state["received_packages"]
        assert len(got) == 2
        want = [mixes[o] for o in fed.client_ids if o != c]  # mutual partners' mixes coincide

        def key(p: dict[str, torch.Tensor]) -> float:
            return float(sum(v.double().sum() for v in p.values()))

        for g, w in zip(sorted(got, key=key), sorted(want, key=key), strict=True):
            assert all(torch.allclose(g[k].double(), w[k], atol=1e-6) for k in g)


def test_summary_scores_the_global_model_on_the_clients_pooled_validation_graphs(plain_plus_run: Run, monkeypatch) -> None:
    method, fed = plain_plus_run.method, plain_plus_run.fed
    pooled = [g for cid in fed.client_ids for g in fed.parties[cid].state["data"]["val"]]
    assert plain_plus_run.summary["global_val_auc"] == method.score_graphs(fed.server.state["model"], pooled)["auc"]
    # the trained model scores 1.0 on every set of this easy task; an untrained one tells them apart
    torch.manual_seed(5)
    monkeypatch.setitem(fed.server.state, "model", method.make_model())
    measured = method.measure(fed)
    untrained_val = method.score_graphs(fed.server.state["model"], pooled)["auc"]
    assert measured["global_val_auc"] == untrained_val != measured["global_test_auc"]


def test_sealed_stack_forwards_only_sealed_models_and_excludes_the_receivers_own() -> None:
    run = _run("cefgc", "cefgc", tune_sampling=True, tune_samples=4)  # also the sender's sampler choice
    fed = run.fed
    chosen = {tuple(m["sampling"]) for c in run.method.info["clients"].values() for m in c["phase1"]["models"].values()}
    assert all(len(s) == 3 for s in chosen)
    assert {r.form for r in fed.transcript.view(SERVER) if r.tag == TAG_MODEL} == {Form.SEALED}
    assert run.method.report()["paper_rounds"]["flights"] > 3  # SecAgg+ takes extra flights, reported
    hist = {c: [m.node_count_hist for m in fed.parties[c].state["generators"].values()] for c in fed.client_ids}
    for c in fed.client_ids:
        received = fed.parties[c].state["received_models"]
        assert len(received) == sum(len(hist[o]) for o in fed.client_ids if o != c)
        for m in received:
            assert not any(torch.equal(m.node_count_hist, h) for h in hist[c])
            assert any(torch.equal(m.node_count_hist, h) for o in fed.client_ids if o != c for h in hist[o])
    assert run.summary["test_auc"] == run.summary["test_auc"]


def test_he_run_equals_the_plaintext_run_up_to_ckks_error(he_run: Run, plain_plus_run: Run) -> None:
    a, b = state_of(he_run.fed.server.state["model"]), state_of(plain_plus_run.fed.server.state["model"])
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-4
    assert abs(he_run.summary["test_auc"] - plain_plus_run.summary["test_auc"]) <= 0.01


def test_pairwise_feature_tables_travel_under_ckks_and_the_run_equals_the_plaintext_run() -> None:
    he, plain = (_run("cefgc_plus", stack, feature_model="pairwise") for stack in ("cefgc_plus", "plaintext"))
    for run in (he, plain):
        for client in run.fed.clients:
            own = client.state["own_package"]
            present = [s for s in range(2) if float(own[f"s{s}/presence"]) > 0]
            assert present and all(float(own[f"s{s}/edge_features"].sum()) == pytest.approx(1.0, abs=1e-6) for s in present)
    a, b = state_of(he.fed.server.state["model"]), state_of(plain.fed.server.state["model"])
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-4


def test_ckks_aggregate_equals_the_plaintext_mean() -> None:
    g = torch.Generator().manual_seed(0)
    inputs = {f"client/{k}": {"w": torch.randn(40, 30, generator=g), "b": torch.randn(30, generator=g)} for k in range(3)}
    out = {}
    for stack in ("cefgc_plus", "plaintext"):
        fed = Federation(3, ProtocolStack.load(stack), extra_parties=("keyholder",))
        out[stack] = fed.exchange.aggregate(TAG_WEIGHTS, inputs)
    for k in ("w", "b"):
        assert torch.allclose(out["cefgc_plus"][k], out["plaintext"][k], atol=1e-5)
        assert torch.allclose(out["plaintext"][k], sum(x[k] for x in inputs.values()) / 3, atol=1e-6)


def test_under_the_papers_pairs_a_client_recovers_its_partners_model_as_two_avg_minus_own() -> None:
    fed = _run("cefgc_plus", "plaintext", mix_peers=1).fed
    partners = fed.parties[SERVER].state["partners"]
    assert all(len(p) == 1 for p in partners.values())
    for c in fed.client_ids:
        own = fed.parties[c].state["own_package"]
        truths = {o: fed.parties[o].state["own_package"] for o in fed.client_ids if o != c}
        res = partner_recovery(own, fed.parties[c].state["received_packages"], truths)
        victims = [o for o, p in partners.items() if p == [c] and o != c]
        if victims:  # c was someone's nearest peer: that someone's package is exposed
            assert res["best_relative_error"] < 1e-6 and res["recovered"] in victims
        else:
            assert res["best_relative_error"] > 1e-3


@pytest.mark.parametrize("which", ["plaintext", "he"])
def test_under_the_default_groups_no_client_recovers_a_peer(which: str, he_run: Run, plain_plus_run: Run) -> None:
    fed = (he_run if which == "he" else plain_plus_run).fed
    for c in fed.client_ids:
        own = fed.parties[c].state["own_package"]
        truths = {o: fed.parties[o].state["own_package"] for o in fed.client_ids if o != c}
        received = fed.parties[c].state["received_packages"]
        res = partner_recovery(own, received, truths, group_sizes=(2, 3))
        # CKKS noise is ~1e-6 relative; the best guess (the peers' mean) misses each peer by far more
        assert res["best_relative_error"] > 1e-3, (c, res["best_relative_error"])
        # and yet the sum of the two peers is exactly there: the mix is the mean of all three
        peers_sum = {k: sum(t[k].double() for t in truths.values()) for k in own}
        cand = {k: 3 * received[0][k].double() - own[k].double() for k in own}
        assert all(torch.allclose(cand[k], peers_sum[k], atol=1e-4) for k in own)
        # which is what the client samples from: its peers' mean, not a third of its own model again
        (usable,) = (he_run if which == "he" else plain_plus_run).method._peers_mean(fed.parties[c], received)
        assert all(torch.allclose(usable[k].double(), peers_sum[k] / 2, atol=1e-4) for k in own if k.endswith("/params"))


@pytest.mark.parametrize("name", ["cefgc_star", "cefgc_star_plus"])
def test_star_variants_run_end_to_end(name: str) -> None:
    run = _run(name, "plaintext")
    assert run.fed.transcript.communication_rounds() == 3
    assert all(len(run.fed.parties[c].state["generators"]) == 1 for c in run.fed.client_ids)
    assert 0.0 <= run.summary["test_auc"] <= 1.0


def test_plus_variant_refuses_a_relay_that_cannot_mix() -> None:
    with pytest.raises(ConfigError, match="sealed_relay.*cannot combine items"):
        _run("cefgc_plus", "cefgc")


def test_dense_package_average_is_presence_weighted() -> None:
    from securefg.methods.cefgc.package import Architecture, pack_dense, unpack_dense
    from securefg.models.graph_score import DEFAULT_SIGMAS, EDPScoreConfig

    arch = Architecture(EDPScoreConfig(), DEFAULT_SIGMAS, 10, 2, False)
    a0, a1, b1 = (arch.new_model(class_label=c, init_seed=s) for c, s in ((0, 1), (1, 2), (1, 3)))
    for m, n in ((a0, 4), (a1, 5), (b1, 7)):
        m.node_count_hist[0, n] = 3
    pa, pb = pack_dense({0: a0, 1: a1}, arch), pack_dense({1: b1}, arch)  # b holds class 1 only
    mix = {k: (pa[k] + pb[k]) / 2 for k in pa}
    got = unpack_dense(mix, arch)
    assert [m.class_label for m in got] == [0, 1]
    assert torch.allclose(got[0].flat_parameters(), a0.flat_parameters())  # unmixed: b lacks class 0
    assert torch.allclose(got[1].flat_parameters(), (a1.flat_parameters() + b1.flat_parameters()) / 2)
    assert got[1].node_count_hist[0].nonzero().flatten().tolist() == [5, 7]


def test_cli_contract_for_cefgc(tmp_path) -> None:
    import json

    from securefg.experiment import RunConfig, run_experiment

    cfg = RunConfig(method="cefgc_star", dataset="synthetic-graphs", clients=3, rounds=100, protocol="plaintext",
                    out=str(tmp_path), progress=False, options=dict(FAST))
    res = run_experiment(cfg)
    saved = json.loads((tmp_path / "result.json").read_text())
    for key in ("method", "dataset", "partition", "clients", "protocol", "seed", "rounds", "metrics", "bytes_total",
                "bytes_by_tag", "wall_seconds", "communication_rounds", "paper_rounds", "flights", "timing"):
        assert key in saved, key
    assert saved["rounds"] == 1 and saved["communication_rounds"] == 3  # one-shot: --rounds is ignored
    assert saved["paper_rounds"]["paper_rounds"] == 3 and res["metrics"]["test_auc"] == saved["metrics"]["test_auc"]


def test_flag_options_given_as_text_are_parsed_not_cast() -> None:
    from securefg.methods.base import _as_type_of

    assert _as_type_of(True, "tune_sampling", "false") is False
    assert _as_type_of(False, "tune_sampling", "True") is True
    assert _as_type_of(True, "tune_sampling", 0) is False
    assert _as_type_of(40, "max_nodes", "40") == "40"  # only flags are parsed here
    with pytest.raises(ConfigError, match="tune_sampling"):
        _as_type_of(True, "tune_sampling", "maybe")


def test_common_neighbour_score_nets_travel_and_get_their_own_cache(tmp_path) -> None:
    run = _run("cefgc", "plaintext", common_neighbors=True, generator_cache=str(tmp_path))
    received = [m for cid in run.fed.client_ids for m in run.fed.parties[cid].state["received_models"]]
    assert received and all(m.config.common_neighbors for m in received)
    plain = method_class("cefgc")(_task(), MethodConfig(rounds=1, seed=1, options={**FAST, "generator_cache": str(tmp_path)}))
    graphs = _task().train[0]
    assert run.method._cache_path(0, graphs) != plain._cache_path(0, graphs)
    # stating the default changes nothing, so caches made before the option existed stay valid
    stated = method_class("cefgc")(_task(), MethodConfig(rounds=1, seed=1, options={
        **FAST, "generator_cache": str(tmp_path), "common_neighbors": False}))
    assert stated._cache_path(0, graphs) == plain._cache_path(0, graphs)


def test_cached_models_serve_other_sampling_settings_without_retraining(tmp_path, monkeypatch) -> None:
    first = _run("cefgc", "plaintext", generator_cache=str(tmp_path))
    import securefg.methods.cefgc.method as method_module

    def no_training(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("phase 1 must load the cached models, not train again")

    monkeypatch.setattr(method_module, "train_generators", no_training)
    tuned = _run("cefgc", "plaintext", generator_cache=str(tmp_path), tune_sampling=True, step_ratio=0.05, langevin_steps=2)
    for cid in tuned.fed.client_ids:
        report = tuned.method.info["clients"][cid]["phase1"]
        assert report["cached"] and all("tuning" in m for m in report["models"].values())
        ratios = {m.sampling.step_ratio for m in tuned.fed.parties[cid].state["generators"].values()}
        assert ratios <= {0.025, 0.05, 0.1} and all(m.sampling.steps_per_level == 2
                                                    for m in tuned.fed.parties[cid].state["generators"].values())
        # same trained weights as the first run's
        for slot, m in tuned.fed.parties[cid].state["generators"].items():
            assert torch.equal(m.flat_parameters(), first.fed.parties[cid].state["generators"][slot].flat_parameters())
    # a cold cache trains the same models and tunes with the same draws: the same run
    monkeypatch.undo()
    cold = _run("cefgc", "plaintext", generator_cache=str(tmp_path / "cold"), tune_sampling=True, step_ratio=0.05,
                langevin_steps=2)
    assert cold.summary["test_auc"] == tuned.summary["test_auc"]
    for cid in cold.fed.client_ids:
        picked = [{s: (m["sampling"], m["tuning"]) for s, m in run.method.info["clients"][cid]["phase1"]["models"].items()}
                  for run in (cold, tuned)]
        assert picked[0] == picked[1]


@pytest.mark.parametrize(("option", "value", "message"), [
    ("synthetic_ratio", -1.0, "synthetic_ratio must be finite and >= 0"),
    ("synthetic_ratio", float("nan"), "synthetic_ratio must be finite"),
    ("diffusion_lr", 0.0, "diffusion_lr must be finite and > 0"),
    ("gnn_epochs", 0, "gnn_epochs must be >= 1"),
    ("max_nodes", 1, "max_nodes must be >= 2"),
    ("diffusion_epochs", "many", "diffusion_epochs must be an integer"),
    ("langevin_steps", 0, "LangevinParams is invalid"),
    ("dp_epsilon", -1.0, "dp_epsilon must be finite and >= 0"),
    ("mix_peers", 0, "mix_peers must be >= 1"),
    ("feature_model", "gaussian", "feature_model must be 'degree' or 'pairwise'"),
])
def test_bad_options_are_refused_when_the_method_is_built(option: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        method_class("cefgc")(_task(), _config(**{option: value}))


def test_a_cap_below_every_clients_graphs_is_refused_before_any_generator_trains(monkeypatch) -> None:
    import securefg.methods.cefgc.method as cefgc_module

    def no_training(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("phase 1 started")

    monkeypatch.setattr(cefgc_module, "train_generators", no_training)
    smallest = min(int(g.num_nodes) for part in _task().train for g in part)
    with pytest.raises(ConfigError, match=f"no training graph of at most max_nodes={smallest - 1}"):
        _run("cefgc", "plaintext", max_nodes=smallest - 1)


def test_a_generator_cache_that_is_a_file_is_refused(tmp_path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match="generator_cache must name a folder"):
        method_class("cefgc")(_task(), _config(generator_cache=str(blocker)))


def test_dp_option_reports_the_accountants_epsilon_and_is_deterministic_given_the_seed() -> None:
    from securefg.methods.cefgc.dp_plan import composed_epsilon

    runs = [_run("cefgc", "plaintext", dp_epsilon=4.0, diffusion_epochs=2) for _ in range(2)]
    report = runs[0].method.report()
    privacy = report["privacy"]
    assert privacy["unit"] == "graph" and privacy["target_epsilon"] == 4.0
    assert 3.5 < privacy["epsilon"] <= 4.0  # the accountant's figure, within the target
    for client in privacy["clients"].values():
        for slot in client["slots"].values():  # recomputed from the recorded noise: the same epsilon
            again = composed_epsilon(noise_multiplier=slot["noise_multiplier"], histogram_sigma=slot["histogram_sigma"],
                                     table_sigma=slot["table_sigma"], sample_rate=slot["sample_rate"],
                                     steps=slot["steps"], delta=slot["delta"])
            assert again == pytest.approx(slot["epsilon"]) and slot["noise_multiplier"] > 0
    assert runs[0].summary["test_auc"] == runs[1].summary["test_auc"]
    for cid in runs[0].fed.client_ids:
        a, b = (r.fed.parties[cid].state for r in runs)
        for slot, m in a["generators"].items():
            assert torch.equal(m.flat_parameters(), b["generators"][slot].flat_parameters())
            assert torch.equal(m.node_count_hist, b["generators"][slot].node_count_hist)
        assert all(torch.equal(t.probs, b["feature_tables"][s].probs) for s, t in a["feature_tables"].items())
    # and the noise is real: without DP the same seed trains other weights and exact tables
    plain = _run("cefgc", "plaintext", diffusion_epochs=2)
    cid = plain.fed.client_ids[0]
    slot = next(iter(plain.fed.parties[cid].state["generators"]))
    assert not torch.equal(plain.fed.parties[cid].state["generators"][slot].flat_parameters(),
                           runs[0].fed.parties[cid].state["generators"][slot].flat_parameters())
    assert "privacy" not in plain.method.report()


def test_dp_refuses_the_senders_sampler_tuning() -> None:
    with pytest.raises(ConfigError, match="tune_sampling reads the private training graphs"):
        method_class("cefgc")(_task(), _config(dp_epsilon=1.0, tune_sampling=True))


@pytest.mark.parametrize("epsilon", [1.0, 16.0])
def test_the_noise_plan_spends_the_target_epsilon_and_less_epsilon_means_more_noise(epsilon: float) -> None:
    from securefg.methods.cefgc.dp_plan import ONE_SHOT_SHARE, plan_slot_noise

    plan = plan_slot_noise(epsilon=epsilon, delta=1e-5, num_graphs=40, batch_size=8, epochs=10)
    assert plan.sample_rate == 0.2 and plan.steps == 50
    assert epsilon * 0.99 <= plan.epsilon <= epsilon
    looser = plan_slot_noise(epsilon=2 * epsilon, delta=1e-5, num_graphs=40, batch_size=8, epochs=10)
    assert looser.noise_multiplier < plan.noise_multiplier and looser.histogram_sigma < plan.histogram_sigma
    assert 0 < ONE_SHOT_SHARE < 0.5


def test_a_client_that_drops_out_before_its_sealed_upload_is_left_out_of_every_bundle() -> None:
    method = method_class("cefgc")(_task(), _config())
    fed = Federation(3, ProtocolStack.load("cefgc"), seed=1)
    fed.exchange.dropouts = {"relay/upload": frozenset({"client/2"})}  # dies instead of uploading its boxes
    runner = RoundRunner(method, fed, rounds=1, progress=False)
    out = runner.run()
    assert runner.program_parties.server.dropped["client/2"].startswith("relay/upload cefgc/model")
    # the survivors still get each other's models (and nothing else), train and average
    for c, other in (("client/0", "client/1"), ("client/1", "client/0")):
        received = fed.parties[c].state["received_models"]
        assert len(received) == len(fed.parties[other].state["generators"])
    assert {r.sender for r in fed.transcript if r.tag == TAG_MODEL and r.stage == "relay/upload"} == {"client/0", "client/1"}
    assert 0.0 <= out.summary["test_auc"] <= 1.0


def test_a_model_the_server_swapped_in_under_the_sealed_relay_is_refused_by_the_party_program(monkeypatch) -> None:
    # the attack of issue 38 on the party programs: the server seals its own "model" to client/1's
    # public sealing key and forwards it in place of a real one; client/1 refuses it (by slot:
    # the relay is shuffled) before training on anything (in process, a party's error ends the run)
    from securefg.federation.program import relay as program_relay
    from securefg.protocol.relay.constants import item_binding
    from securefg.protocol.relay.padding import frame
    from securefg.protocol.relay.sealed_box import seal
    from securefg.protocol.relay.sealed_relay import SealedRelay

    method = method_class("cefgc")(_task(), _config())
    fed = Federation(3, ProtocolStack.load("cefgc"), seed=1)
    seen: dict[str, Any] = {}
    real_server, real_route = program_relay._sealed_server, SealedRelay._server_route

    def sealed_server(ex, mech, call, senders, **kw):  # type: ignore[no-untyped-def]
        seen["call"] = call
        return real_server(ex, mech, call, senders, **kw)

    def route(self, uploads, targets, *, shuffle):  # type: ignore[no-untyped-def]
        bundles = real_route(self, uploads, targets, shuffle=shuffle)
        call = seen["call"]
        (own,) = [st["own"] for st in fed.parties["client/1"].state["mech/sealing"].values()]  # its public key
        bundles["client/1"][0] = seal(own.public_bytes, frame(b"forged", "pow2"),
                                      context=item_binding(call, "client/1", b"item"))
        return bundles

    monkeypatch.setattr(program_relay, "_sealed_server", sealed_server)
    monkeypatch.setattr(SealedRelay, "_server_route", route)
    refused = r"client/1 refused the 'cefgc/model' item in slot 0 .* relay member"
    with pytest.raises(SenderAuthenticationError, match=refused):
        RoundRunner(method, fed, rounds=1, progress=False).run()
    assert "received_models" not in fed.parties["client/1"].state


def test_the_default_stack_is_robust_unless_heads_are_averaged_over_their_owners() -> None:
    """masked_robust returns a judged mean, not the sum owner-only head averaging divides."""
    from securefg.experiment import resolve_stack
    from securefg.run_config import RunConfig

    def stack(method: str, dataset: str, **options: str) -> str:
        return resolve_stack(RunConfig(method=method, dataset=dataset, options=options)).name

    assert stack("cefgc", "MUTAG") == stack("cefgc_star", "PROTEINS") == "cefgc_robust"
    assert stack("cefgc", "Mix") == stack("cefgc_star", "Social") == "cefgc"  # per-dataset heads, owner averaged
    assert stack("cefgc", "Mix", head_average="all") == stack("cefgc", "Mix", heads="shared") == "cefgc_robust"
    assert stack("cefgc_plus", "Mix") == stack("cefgc_plus", "MUTAG") == "cefgc_plus"

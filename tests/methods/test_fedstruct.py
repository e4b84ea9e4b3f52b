"""FedStruct as a method: Algorithm 3 over peer_sum, variants A/B/hardened, stacks, options.

Small CSBM graphs (150 nodes, 3 clients, L_s = 3) keep every test to a few seconds.
"""

from __future__ import annotations

from typing import Any

import pytest
import tomllib
import torch

from securefg.data.partition import RandomPartitioner, client_subgraphs
from securefg.data.synthetic import make_csbm
from securefg.errors import ConfigError, QueryBudgetError
from securefg.federation.codec import encode_tensor
from securefg.federation.envelope import Form
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig
from securefg.models.fedstruct import multi_hop_adjacency, rw_normalized_adjacency
from securefg.models.fedstruct.abar_protocol import contribution, init_abar_state
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.stack import ProtocolStack, protocols_dir

SMALL = {"structure_hops": 3, "structure_dim": 16}


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def small_task(seed: int = 0, clients: int = 3, nodes: int = 150) -> NodeTask:
    g = make_csbm(num_nodes=nodes, num_classes=3, num_features=12, p_in=0.06, p_out=0.01, seed=seed)
    partition = RandomPartitioner(clients, seed=seed)(g)
    return NodeTask(clients=client_subgraphs(g, partition), num_features=12, num_classes=3, full_graph=g)


def run(task: NodeTask, stack: str | ProtocolStack, *, rounds: int = 3, keep: bool = False, seed: int = 0,
        **options: Any) -> tuple[Any, Federation, Any]:
    cfg = MethodConfig(rounds=rounds, train=TrainConfig(lr=0.01, weight_decay=5e-4), seed=seed,
                       options={**SMALL, **options})
    method = method_class("fedstruct")(task, cfg)
    st = stack if isinstance(stack, ProtocolStack) else ProtocolStack.load(stack)
    st.check_tags(method.TAGS)
    fed = Federation(method.num_clients, st, seed=seed, keep_payloads=keep)
    torch.manual_seed(seed)  # dropout masks come from torch's global RNG
    out = RoundRunner(method, fed, rounds=rounds, progress=False).run()
    return method, fed, out


def central_abar(task: NodeTask, hops: int) -> torch.Tensor:
    assert task.full_graph is not None
    a_hat = rw_normalized_adjacency(task.full_graph.edge_index, task.full_graph.num_nodes, dtype=torch.float64)
    return multi_hop_adjacency(a_hat, (0.0,) * (hops - 1) + (1.0,))


def predictions(fed: Federation) -> torch.Tensor:
    return torch.cat([fed.parties[p].state["predictions"] for p in fed.client_ids])


def secure_at_full_precision() -> ProtocolStack:
    """``fedstruct_secure`` with broadcasts at their own precision and the gradient ring at
    2^-24 and clip 4 (update and summed NSF gradient; the shipped 2^-20 and 0.25 are measured on
    Cora/CiteSeer, docs/fedstruct.md): only the masked sums' fixed-point error separates it from
    plaintext."""
    data = tomllib.loads((protocols_dir() / "fedstruct_secure.toml").read_text())
    for table in data["tags"].values():
        table.pop("wire_dtype", None)
    for tag in ("fedstruct/update", "fedstruct/nsf_grad"):
        data["tags"][tag]["params"]["resolution"] = 2.0**-24
        # no saturation either: with per-party dropout streams a test-graph gradient can pass 0.25
        data["tags"][tag]["params"]["clip"] = 4.0
    return ProtocolStack.from_dict(data)


def abar_tolerance(stack: str) -> float:
    """Per-entry error of Ā: each hop's peer sum is off by at most its bound (divided by a degree
    >= 1 and averaged by later hops), so the errors of the hops add up."""
    if stack == "plaintext":
        return 1e-9
    mech = ProtocolStack.load(stack).resolve("fedstruct/abar", ExchangeKind.PEER_SUM).mechanism
    return SMALL["structure_hops"] * mech.settings.quantizer(2).error_bound()


@pytest.mark.parametrize("stack", ["plaintext", "fedstruct_secure"])
def test_each_client_gets_exactly_its_rows_of_the_central_abar(stack: str) -> None:
    task = small_task()
    _, fed, _ = run(task, stack, rounds=1)
    ref = central_abar(task, SMALL["structure_hops"])
    atol = abar_tolerance(stack)
    assert atol < 2e-5
    for k, pid in enumerate(fed.client_ids):
        rows = ref[task.clients[k].global_id]
        assert torch.allclose(fed.parties[pid].state["abar"], rows, atol=atol, rtol=0)


def _hop2_messages(fed: Federation, receiver: int) -> dict[str, bytes]:
    """What each peer k sends receiver i at hop 2, B_ik on i's boundary rows (``abar_rows``'s default
    layout), encoded as the wire would carry it in clear."""
    out = {}
    rows = fed.parties[fed.client_ids[receiver]].state["abar_boundary"]
    for pid in fed.client_ids:
        st = fed.parties[pid].state
        state = init_abar_state(st["graph_view"], st["directory"], betas=st["betas"], dtype=torch.float64)
        b = contribution(st["graph_view"], state, directory=st["directory"], receiver=receiver)[rows]
        if st["graph_view"].client_id != receiver and bool(b.ne(0).any()):
            out[pid] = encode_tensor(b.flatten())[-b.numel() * 8:]  # the raw float64 values
    return out


@pytest.mark.parametrize("stack,visible", [("plaintext", True), ("fedstruct_secure", False)])
def test_the_receiver_sees_single_contributions_only_in_plaintext(stack: str, visible: bool) -> None:
    task = small_task()
    _, fed, _ = run(task, stack, rounds=1, keep=True)
    target = fed.client_ids[0]
    singles = _hop2_messages(fed, receiver=0)
    assert singles, "the receiver must have remote neighbours for this test to mean anything"
    view = [r for r in fed.transcript.view(target) if r.tag == "fedstruct/abar"]
    assert view
    found = {pid for pid, raw in singles.items() for r in view if r.payload is not None and raw in r.payload}
    assert (found == set(singles)) is visible
    # masked: the receiver's inputs are masked vectors and key material, never a plaintext B_ik
    assert (Form.PLAINTEXT in {r.form for r in view}) is visible
    if not visible:
        assert {r.form for r in view if r.stage.endswith("masked_input")} == {Form.MASKED}


@pytest.mark.parametrize("nsf", ["degree", "hop2vec"])
def test_variants_a_b_and_hardened_predict_identically(nsf: str) -> None:
    task = small_task(seed=1)
    no_dropout = {"nsf": nsf, "dropout": 0.0, "input_dropout": 0.0}
    _, fed_b, out_b = run(task, "plaintext", rounds=4, variant="B", **no_dropout)
    _, fed_a, out_a = run(task, "plaintext", rounds=4, variant="A", **no_dropout)
    _, fed_h, out_h = run(task, "plaintext", rounds=4, variant="B", hardened=True, **no_dropout)
    pb, pa, ph = predictions(fed_b), predictions(fed_a), predictions(fed_h)
    assert not torch.allclose(pb, torch.zeros_like(pb))
    assert torch.allclose(pa, pb, atol=1e-4) and torch.equal(pa.argmax(1), pb.argmax(1))
    assert torch.allclose(ph, pb, atol=1e-4) and torch.equal(ph.argmax(1), pb.argmax(1))
    assert [h["mean_val"] for h in out_a.history] == [h["mean_val"] for h in out_b.history]
    assert [h["mean_val"] for h in out_h.history] == [h["mean_val"] for h in out_b.history]


def test_protected_stack_trains_the_same_model_as_plaintext() -> None:
    task = small_task(seed=2)
    _, fed_p, out_p = run(task, "plaintext", rounds=4, nsf="hop2vec")
    _, fed_s, out_s = run(task, secure_at_full_precision(), rounds=4, nsf="hop2vec")
    # Adam's first steps are about lr * sign(g): a coordinate whose gradient is within the ring's
    # 2^-24 step of zero may move either way, so the fixed-point error grows to ~1.4e-4 by round 4
    assert torch.allclose(predictions(fed_p), predictions(fed_s), atol=5e-4)
    assert [h["mean_test"] for h in out_p.history] == [h["mean_test"] for h in out_s.history]
    # the shipped stack also sends θ and the summed NSF gradient as bfloat16 and sums gradients
    # at 2^-20: close, not equal
    _, fed_b, _ = run(task, "fedstruct_secure", rounds=4, nsf="hop2vec")
    pb, pp = predictions(fed_b), predictions(fed_p)
    assert not torch.equal(pb, pp) and float((pb - pp).abs().max()) < 0.05
    assert float((pb.argmax(1) == pp.argmax(1)).float().mean()) >= 0.95
    up = [r for r in fed_s.transcript if r.tag == "fedstruct/update" and r.receiver == "server"]
    assert up and {r.form for r in up} <= {Form.MASKED, Form.KEYS}  # the server never reads one gradient


def test_training_learns_beyond_chance() -> None:
    task = small_task(seed=3, nodes=240)
    _, _, out = run(task, "plaintext", rounds=30, nsf="degree")
    assert out.summary["test_acc"] > 0.6  # 3 classes: chance is about 0.33


def test_pruning_changes_the_rows_and_is_reported_with_the_offline_cost() -> None:
    task = small_task()
    method, fed, _ = run(task, "plaintext", rounds=1, prune_p=1)
    ref = central_abar(task, SMALL["structure_hops"])
    got = torch.cat([fed.parties[p].state["abar"] for p in fed.client_ids])
    order = torch.cat([c.global_id for c in task.clients])
    assert not torch.allclose(got, ref[order], atol=1e-6)
    off = method.report()["offline"]
    assert off["abar"]["prune_p"] == 1 and off["abar"]["hops"] == SMALL["structure_hops"]
    abar_bytes = sum(r.payload_bytes for r in fed.transcript if r.tag == "fedstruct/abar")
    assert off["abar"]["bytes"] == abar_bytes > 0
    assert off["training_bytes"] == fed.transcript.bytes_total() - off["bytes_total"]


def test_hardened_owners_refuse_queries_beyond_their_budget() -> None:
    task = small_task()
    method, _, _ = run(task, "plaintext", rounds=2, hardened=True, query_budget=2)
    assert all(v == 2 for q in method.report()["fedstruct"]["queries_answered"].values() for v in q.values())
    with pytest.raises(QueryBudgetError):
        run(task, "plaintext", rounds=3, hardened=True, query_budget=2)


@pytest.mark.parametrize("options", [{"nsf": "gdv"}, {"variant": "C"}, {"variant": "A", "hardened": True},
                                     {"variant": "A", "prune_p": 3}, {"prune_p": -1}])
def test_invalid_options_are_config_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        method_class("fedstruct")(small_task(), MethodConfig(rounds=1, options=options))


def test_cli_flags_reach_the_method_and_result_reports_offline(tmp_path: Any) -> None:
    import json

    from securefg.cli import main

    out = tmp_path / "run"
    code = main(["run", "--method", "fedstruct", "--nsf", "degree", "--variant", "B", "--dataset", "csbm",
                 "--partition", "random", "--clients", "3", "--rounds", "2", "--protocol", "plaintext",
                 "--option", "structure_hops=2", "--option", "structure_dim=8", "--out", str(out), "--no-progress"])
    assert code == 0
    res = json.loads((out / "result.json").read_text())
    assert res["fedstruct"]["nsf"] == "degree" and res["fedstruct"]["variant"] == "B"
    assert res["offline"]["abar"]["bytes"] > 0 and res["offline"]["abar"]["hops"] == 2
    assert res["bytes_by_tag"]["fedstruct/abar"] == res["offline"]["abar"]["bytes"]


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path: Any) -> None:
    task = small_task(seed=4)
    _, fed_full, _ = run(task, "plaintext", rounds=4, nsf="hop2vec")

    def runner(rounds: int, resume: bool) -> Federation:
        cfg = MethodConfig(rounds=4, train=TrainConfig(lr=0.01, weight_decay=5e-4), seed=0, options=dict(SMALL))
        method = method_class("fedstruct")(task, cfg)
        fed = Federation(method.num_clients, ProtocolStack.load("plaintext"), seed=0)
        torch.manual_seed(0)
        RoundRunner(method, fed, rounds=rounds, out_dir=tmp_path, checkpoint_every=2, resume=resume,
                    progress=False).run()
        return fed

    runner(2, False)
    fed_resumed = runner(4, True)
    assert torch.allclose(predictions(fed_resumed), predictions(fed_full), atol=1e-6)
    # the offline phase re-runs on resume; its records must not be counted twice
    assert fed_resumed.transcript.bytes_by_tag() == fed_full.transcript.bytes_by_tag()
    assert len(fed_resumed.transcript) == len(fed_full.transcript)


def test_node2vec_tables_are_cached_and_shared_identically(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path))
    task = small_task(seed=5)
    _, fed_b, _ = run(task, "plaintext", rounds=1, nsf="node2vec", node2vec_epochs=1)
    assert len(list((tmp_path / "fedstruct").glob("node2vec_*.pt"))) == 1
    _, fed_a, _ = run(task, "plaintext", rounds=1, nsf="node2vec", node2vec_epochs=1, variant="A")
    server_table = fed_a.server.state["structure"]
    for pid in fed_b.client_ids:  # every client assembled the full table from the owners' rows
        assert torch.equal(fed_b.parties[pid].state["structure"], server_table.float())


def test_a_cached_node2vec_table_trains_exactly_like_a_fresh_one(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path))
    task = small_task(seed=6)
    _, fresh, _ = run(task, "plaintext", rounds=3, nsf="node2vec", node2vec_epochs=1)
    assert len(list((tmp_path / "fedstruct").glob("node2vec_*.pt"))) == 1

    def no_training(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the second run must read the cached table, not train Node2Vec again")

    monkeypatch.setattr("securefg.methods.fedstruct.structure.train_node2vec", no_training)
    _, cached, _ = run(task, "plaintext", rounds=3, nsf="node2vec", node2vec_epochs=1)
    assert torch.equal(predictions(fresh), predictions(cached))


def test_patience_stops_training_at_the_same_best_validation_round() -> None:
    from securefg.experiment import RunConfig, run_experiment
    from securefg.federation.runner import stop_round

    def go(**options: Any) -> dict[str, Any]:
        cfg = RunConfig(method="fedstruct", dataset="csbm", partition="random", clients=3, rounds=40, lr=0.05,
                        protocol="plaintext", progress=False,
                        options={"nsf": "degree", "structure_hops": 2, "structure_dim": 8, **options})
        return run_experiment(cfg)

    full, stopped = go(patience=0), go(patience=3)
    vals = [h["mean_val"] for h in full["history"]]
    assert full["rounds_run"] == 40 and "stopped_early" not in full
    stop = next(r for r in range(40) if stop_round(vals[: r + 1], 3))
    assert stop < 39  # the test must exercise an early stop
    assert stopped["stopped_early"]["round"] == stop and stopped["rounds_run"] == stop + 1
    assert stopped["history"] == full["history"][: stop + 1]  # stopping changes nothing before it
    assert stopped["metrics"]["best_round"] == stop - 3  # reported at the best validation round
    assert stopped["metrics"]["test_acc"] == full["history"][stop - 3]["mean_test"]
    assert stopped["bytes_total"] < full["bytes_total"]


def test_update_coordinates_beyond_the_clip_are_saturated_and_summed_exactly(monkeypatch: Any) -> None:
    """``fedstruct/update`` saturates beyond its clip (0.25). The 150-node test graph has few
    labelled nodes, so early gradients pass the clip (CiteSeer's peak over 100 rounds is 0.115):
    the server's sum is then exactly the sum of the clipped gradients, within the ring's step."""
    from securefg.federation.program.exchange import ClientExchange, ServerExchange

    stack = ProtocolStack.load("fedstruct_secure")
    quantizer = stack.resolve("fedstruct/update", ExchangeKind.AGGREGATE).mechanism.settings.quantizer(3)
    clip = quantizer.clip
    seen: list[tuple[float, float]] = []
    inputs: dict[int, list[dict[str, torch.Tensor]]] = {}  # each client's gradients, by round
    contribute, aggregate = ClientExchange.contribute, ServerExchange.aggregate

    def recording_input(self: ClientExchange, tag: str, round: int, tensors: Any, **kw: Any) -> Any:
        if tag == "fedstruct/update":
            inputs.setdefault(round, []).append({k: v.detach().clone() for k, v in tensors.items()})
        return contribute(self, tag, round, tensors, **kw)

    def recording(self: ServerExchange, tag: str, **kw: Any) -> Any:
        out = aggregate(self, tag, **kw)
        if tag == "fedstruct/update":
            for key, total in out.items():
                parts = [d[key].double() for d in inputs[self.round]]
                clipped = sum(p.clamp(-clip, clip) for p in parts)
                seen.append((max(float(p.abs().max()) for p in parts), float((total.double() - clipped).abs().max())))
        return out

    monkeypatch.setattr(ClientExchange, "contribute", recording_input)
    monkeypatch.setattr(ServerExchange, "aggregate", recording)
    run(small_task(seed=7), stack, rounds=3, nsf="hop2vec")
    assert max(peak for peak, _ in seen) > clip  # saturation did happen
    assert max(err for _, err in seen) <= quantizer.error_bound()


def _as_tensor(payload: bytes | None) -> torch.Tensor | None:
    """A payload read as one tensor, or None (masked, key and sealed bytes do not decode)."""
    from securefg.errors import CodecError
    from securefg.federation.codec import decode_tensor

    try:
        return decode_tensor(payload or b"").double().flatten()
    except (CodecError, ValueError, RuntimeError):
        return None


def test_the_server_never_reads_the_summed_nsf_gradient_under_the_default_stack_while_plaintext_shows_it() -> None:
    task = small_task(seed=4)
    found = {}
    for stack in ("plaintext", "fedstruct_secure"):
        _, fed, _ = run(task, stack, rounds=2, keep=True, nsf="hop2vec")
        summed = fed.parties["client/0"].state["nsf_grad"].double().flatten()  # what every client stepped S with
        assert bool(summed.ne(0).any())
        mine = [r for r in fed.transcript if r.tag == "fedstruct/nsf_grad" and "server" in (r.sender, r.receiver)]
        assert mine
        if stack == "fedstruct_secure":
            assert {r.form for r in mine} <= {Form.KEYS, Form.MASKED, Form.SEALED}
        guesses = [g for g in (_as_tensor(r.payload) for r in mine) if g is not None]
        found[stack] = any(g.numel() == summed.numel() and torch.allclose(g, summed, atol=1e-6) for g in guesses)
    assert found == {"plaintext": True, "fedstruct_secure": False}


# ------------------------------------------------------------------ edge-level DP (issue 22)
def _reported_graph(fed: Federation, n: int) -> torch.Tensor:
    """The union of every client's reported view as one undirected edge_index."""
    parts = []
    for pid in fed.client_ids:
        v = fed.parties[pid].state["structure_view"]
        parts += [v.intra_edges, v.inter_edges, v.inter_edges.flip(0)]
    return torch.unique(torch.cat(parts, 1), dim=1)


@pytest.mark.parametrize("stack", ["plaintext", "fedstruct_secure"])
def test_edge_dp_runs_every_party_on_one_reported_graph_and_keeps_the_true_view_as_knowledge(stack: str) -> None:
    task = small_task(seed=2)
    method, fed, _ = run(task, stack, rounds=1, seed=3, edge_dp_epsilon=1.0, edge_dp_seeded=True)
    assert task.full_graph is not None
    n = int(task.full_graph.num_nodes)
    views = {pid: fed.parties[pid].state["structure_view"] for pid in fed.client_ids}
    # both ends of a reported inter pair hold it (one peer drew it, the peer sum told the other)
    for pid, v in views.items():
        for (u, w), owner in zip(v.inter_edges.t().tolist(), v.inter_owner.tolist(), strict=True):
            other = views[fed.client_ids[owner]]
            assert bool(((other.inter_edges[0] == w) & (other.inter_edges[1] == u)).any())
    reported = _reported_graph(fed, n)
    truth = torch.unique(task.full_graph.edge_index, dim=1)
    assert reported.size(1) != truth.size(1) or not torch.equal(reported, truth)  # at epsilon 1 the graph moves
    # Ā rows are exactly those of the reported graph: the true graph enters nothing downstream
    a_hat = rw_normalized_adjacency(reported, n, dtype=torch.float64)
    ref = multi_hop_adjacency(a_hat, (0.0,) * (SMALL["structure_hops"] - 1) + (1.0,))
    for k, pid in enumerate(fed.client_ids):
        assert torch.allclose(fed.parties[pid].state["abar"], ref[task.clients[k].global_id], atol=abar_tolerance(stack))
        true_view = fed.parties[pid].state["graph_view"]
        assert torch.equal(true_view.nodes, task.clients[k].global_id.cpu())
    rep = method.report()["privacy"]
    assert rep["epsilon"] == pytest.approx(1.0) and rep["delta"] == 0.0 and rep["unit"] == "edge"
    assert rep["kept"] + rep["fake"] == reported.size(1) // 2 and rep["true_pairs"] == truth.size(1) // 2


def test_edge_dp_reports_reach_only_their_receiver_under_the_default_stack() -> None:
    task = small_task(seed=2)
    _, fed, _ = run(task, "fedstruct_secure", rounds=1, keep=True, edge_dp_epsilon=1.0, edge_dp_seeded=True)
    mine = [r for r in fed.transcript if r.tag == "fedstruct/edge_rr"]
    assert mine and {r.form for r in mine if "server" in (r.sender, r.receiver)} <= {Form.KEYS, Form.MASKED, Form.SEALED}


def test_edge_dp_noise_is_fresh_per_run_unless_seeded() -> None:
    task = small_task(seed=2)
    graphs = []
    for seeded in (True, True, False, False):
        _, fed, _ = run(task, "plaintext", rounds=1, edge_dp_epsilon=1.0, edge_dp_seeded=seeded)
        graphs.append(_reported_graph(fed, 150))
    assert torch.equal(graphs[0], graphs[1])
    assert not (graphs[2].shape == graphs[3].shape and torch.equal(graphs[2], graphs[3]))


@pytest.mark.parametrize("options", [{"edge_dp_epsilon": -1.0}, {"edge_dp_epsilon": float("inf")},
                                     {"edge_dp_epsilon": 2.0, "variant": "A"}, {"edge_dp_epsilon": 2.0, "nsf": "node2vec"},
                                     {"edge_dp_epsilon": 2.0, "edge_dp_keep": 0.99}, {"edge_dp_seeded": 3}])
def test_bad_edge_dp_options_are_config_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="edge_dp"):
        method_class("fedstruct")(small_task(), MethodConfig(rounds=1, options=options))


def test_a_tampered_report_block_is_refused() -> None:
    from securefg.errors import InvalidInputError
    from securefg.methods.fedstruct.edge_dp import _received_pairs
    from securefg.methods.fedstruct.parties import directory_of

    task = small_task()
    directory = directory_of(task)
    theirs = directory.nodes_of(2)
    block = torch.zeros(theirs.numel(), 150, dtype=torch.float64)
    lower = int(directory.nodes_of(0)[0])
    block[0, lower] = 1.0
    assert _received_pairs(block, theirs, directory, 2).tolist() == [[int(theirs[0])], [lower]]
    block[1, lower] = 2.0
    with pytest.raises(InvalidInputError, match="0/1"):
        _received_pairs(block, theirs, directory, 2)
    block[1, lower] = 0.0
    block[0, int(theirs[1])] = 1.0
    with pytest.raises(InvalidInputError, match="draws itself"):
        _received_pairs(block, theirs, directory, 2)


def test_edge_dp_local_graph_keeps_the_true_local_matrix_and_says_what_it_leaves_uncovered() -> None:
    from securefg.models.fedstruct.client_step import local_propagation

    task = small_task(seed=2)
    results = {}
    for local in (False, True):
        method, fed, _ = run(task, "plaintext", rounds=1, edge_dp_epsilon=1.0, edge_dp_seeded=True,
                             edge_dp_local_graph=local)
        st = fed.parties["client/1"].state
        betas = method.settings.local_betas
        true_local = local_propagation(st["graph_view"], betas=betas)
        results[local] = torch.allclose(st["data"].a_local.to_dense().double(), true_local.to_dense().double())
        notes = " ".join(method.report()["privacy"]["notes"])
        assert ("true intra-client edges" in notes) is local
    assert results == {False: False, True: True}

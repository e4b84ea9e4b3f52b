"""FedSage / FedSage+ through the protocol layer: NeighGen shapes, mending, what each owner reads."""

from __future__ import annotations

import pytest
import torch

from securefg.data.partition import LouvainPartitioner, client_subgraphs
from securefg.data.splits import with_node_split
from securefg.data.synthetic import make_csbm
from securefg.errors import CodecError, ConfigError
from securefg.federation.codec import decode_tensors
from securefg.federation.envelope import Form
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.fedsage import TAG_FEATURE_GRAD, TAG_GENERATED
from securefg.methods.fedsage.client import greedy_loss, mend, nearest_rows, peer_gradient
from securefg.methods.fedsage.impair import impair
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig
from securefg.models.neighgen import NeighGen
from securefg.protocol.stack import ProtocolStack

FEATURES = 16
# the owners keep their generator views here: the privacy tests below read everything an owner saw
GEN_OPTIONS = {"gen_local_steps": 20, "gen_fed_steps": 3, "gen_batch": 16, "gen_hidden": 32, "keep_generator_views": True}


def _task(clients: int = 3) -> NodeTask:
    g = make_csbm(num_nodes=300, num_classes=3, num_features=FEATURES, seed=0)
    g.x = g.x + 0.3 * torch.randn(g.x.shape, generator=torch.Generator().manual_seed(1))  # continuous: no tied rows
    g = with_node_split(g, ratios=(0.6, 0.2, 0.2), seed=0)
    part = LouvainPartitioner(clients, seed=0)(g)
    return NodeTask(clients=client_subgraphs(g, part), num_features=FEATURES, num_classes=3, full_graph=g)


def _run(method: str = "fedsage_plus", stack: str = "plaintext", rounds: int = 8, task: NodeTask | None = None, **options):
    task = task or _task()
    opts = {**(GEN_OPTIONS if method == "fedsage_plus" else {}), **options}
    m = method_class(method)(task, MethodConfig(rounds=rounds, train=TrainConfig(lr=0.01, weight_decay=5e-4, local_epochs=2),
                                                seed=0, hidden=16, options=opts))
    fed = Federation(m.num_clients, ProtocolStack.load(stack), seed=0, keep_payloads=True)
    out = RoundRunner(m, fed, rounds=rounds, progress=False).run()
    return m, fed, out, task


@pytest.fixture(scope="module")
def plain():
    return _run(stack="plaintext")


@pytest.fixture(scope="module")
def secure():
    return _run(stack="fedsage_secure")


# --------------------------------------------------------------------------------- pieces
def test_neighgen_outputs_have_the_right_shapes() -> None:
    model = NeighGen(FEATURES, num_pred=4, latent=8, gen_hidden=12)
    x, ei = torch.randn(7, FEATURES), torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    z = model.embed(x, ei)
    assert z.shape == (7, 8)
    assert model.degrees(z).shape == (7,) and bool((model.degrees(z) >= 0).all())
    gen = model.features(z[:3], torch.zeros(3, 8))
    assert gen.shape == (3, 4, FEATURES) and float(gen.detach().abs().max()) <= 1.0
    with pytest.raises(ValueError, match="noise of shape"):
        model.features(z[:3], torch.zeros(2, 8))
    with pytest.raises(ValueError, match="NeighGen needs positive sizes"):
        NeighGen(FEATURES, num_pred=0)


def test_impair_hides_nodes_and_counts_each_kept_nodes_hidden_neighbours() -> None:
    task = _task()
    data = task.clients[0]
    graph = impair(data, 0.2, torch.Generator().manual_seed(0))
    n = int(data.num_nodes)
    assert graph.kept.numel() + graph.hidden.numel() == n and graph.hidden.numel() == round(0.2 * n)
    assert not set(graph.kept.tolist()) & set(graph.hidden.tolist())
    hidden = set(graph.hidden.tolist())
    for pos, v in enumerate(graph.kept.tolist()):  # n_v from the original edges, independently
        nbrs = set(data.edge_index[1][data.edge_index[0] == v].tolist()) & hidden
        assert int(graph.missing[pos]) == len(nbrs)
        assert set(graph.neigh_idx[graph.neigh_ptr[pos]:graph.neigh_ptr[pos + 1]].tolist()) == nbrs
    assert int(graph.edge_index.max()) < graph.kept.numel()
    with pytest.raises(ConfigError, match="hide_portion"):
        impair(data, 1.0, torch.Generator())


def test_greedy_loss_matches_each_generated_vector_to_its_nearest_true_neighbour() -> None:
    gen = torch.tensor([[[0.0, 0.0], [1.0, 1.0]]])  # one node, P = 2
    true = torch.tensor([[[1.0, 1.0], [0.0, 2.0], [9.0, 9.0]]])
    mask = torch.tensor([[True, True, False]])  # the third is padding
    # n_v = 2: vector 0's nearest is (1,1) or (0,2): mse 1 (either); vector 1's is (1,1): 0
    assert float(greedy_loss(gen, true, mask, torch.tensor([2.0]))) == pytest.approx(1.0)
    # n_v = 1: only the first generated vector counts
    assert float(greedy_loss(gen, true, mask, torch.tensor([1.0]))) == pytest.approx(1.0)
    assert float(greedy_loss(gen[:, [1, 0]], true, mask, torch.tensor([1.0]))) == pytest.approx(0.0)


def test_peer_gradient_is_the_autograd_gradient_of_the_nearest_neighbour_loss() -> None:
    gen = torch.randn(6, FEATURES, requires_grad=True)
    own = torch.randn(9, FEATURES)
    loss = (torch.cdist(gen, own).pow(2).min(1).values / FEATURES).sum()
    loss.backward()
    grad, value = peer_gradient(gen.detach(), own)
    assert torch.allclose(grad, gen.grad, atol=1e-6)
    assert value == pytest.approx(float(loss), rel=1e-5)


def test_a_large_sparse_peer_matches_through_its_csr_view_as_cdist_does(monkeypatch) -> None:
    from securefg.models import sage

    monkeypatch.setattr(sage, "SPARSE_FEATURES_FROM", 0)  # this small table takes the sparse path
    g = torch.Generator().manual_seed(0)
    own = (torch.rand(40, 300, generator=g) < 0.03).float() * torch.rand(40, 300, generator=g)
    gen = own[torch.randint(0, 40, (25,), generator=g)] + 0.05 * torch.randn(25, 300, generator=g)
    assert sage.sparse_view(own) is not None
    want = torch.cdist(gen, own).argmin(1)
    assert torch.equal(nearest_rows(gen, own), want)
    assert torch.equal(nearest_rows(torch.cat([gen] * 50), own), torch.cat([want] * 50))  # several chunks
    assert nearest_rows(gen[:0], own).shape == (0,)
    grad, value = peer_gradient(gen, own)
    assert torch.allclose(grad, 2.0 * (gen - own[want]) / 300)
    assert value == pytest.approx(float((gen - own[want]).pow(2).sum() / 300), rel=1e-5)


def test_mended_graph_has_the_predicted_number_of_generated_leaves_per_node() -> None:
    task = _task()
    data = task.clients[1]
    model = NeighGen(FEATURES, num_pred=3, gen_hidden=8)
    with torch.no_grad():  # a dGen that predicts a spread of counts, some above num_pred
        model.dgen.weight.normal_(0, 2.0, generator=torch.Generator().manual_seed(0))
        model.dgen.bias.fill_(1.0)
        expected = model.degrees(model.embed(data.x, data.edge_index)).round().clamp(0, 3).long()
    assert len(set(expected.tolist())) > 1
    mended, counts = mend(data, model, generator=torch.Generator().manual_seed(0))
    n, total = int(data.num_nodes), int(expected.sum())
    assert torch.equal(counts, expected) and int(counts.max()) <= 3
    assert mended.num_nodes == n + total and int(mended.generated_mask.sum()) == total
    new_edges = mended.edge_index[:, data.edge_index.size(1):]
    assert new_edges.size(1) == 2 * total
    attached = new_edges[0][new_edges[1] >= n]  # real endpoint of each generated leaf
    assert torch.equal(torch.bincount(attached, minlength=n), expected)
    assert not bool(mended.train_mask[n:].any() | mended.val_mask[n:].any() | mended.test_mask[n:].any())
    assert torch.equal(mended.x[:n], data.x)


# ---------------------------------------------------------------------------- end to end
def test_small_end_to_end_run_learns_and_uses_only_its_tags(plain) -> None:
    m, fed, out, _ = plain
    assert {r.tag for r in fed.transcript} == set(m.TAGS)
    assert out.summary["test_acc"] > 0.6  # 3 classes: chance is 1/3
    rep = m.report()["fedsage"]
    assert rep["federated_steps"] == 3 and all(v > 0 for v in rep["generated_neighbours"].values())
    for pid in fed.client_ids:  # each owner trains on its mended graph
        st = fed.parties[pid].state
        assert st["data"].num_nodes == st["original_data"].num_nodes + int(st["generated_counts"].sum())
        x, gen = st["data"].x, st["data"].generated_mask  # the reported norms are those of its rows
        assert rep["generated_feature_norm"][pid] == pytest.approx(float(x[gen].norm(dim=1).mean()), rel=1e-5)
        assert rep["real_feature_norm"][pid] == pytest.approx(float(x[~gen].norm(dim=1).mean()), rel=1e-5)


def test_protected_stack_equals_plaintext(plain, secure) -> None:
    assert secure[2].summary["test_acc"] == pytest.approx(plain[2].summary["test_acc"], abs=0.005)
    for pid in plain[1].client_ids:
        a, b = plain[1].parties[pid].state, secure[1].parties[pid].state
        assert torch.allclose(a["data"].x, b["data"].x, atol=1e-4)


def test_a_plain_run_keeps_no_generator_views_and_trains_the_same(plain) -> None:
    # the views grow as M(M-1) batches per federated step (14 GB on Cora with 20 owners): kept only on request
    _, fed, out, _ = _run(stack="plaintext", keep_generator_views=False)
    assert out.summary["test_acc"] == plain[2].summary["test_acc"]
    for pid in fed.client_ids:
        st = fed.parties[pid].state
        assert not {"sent_generated", "received_generated", "feature_grad_sum"} & set(st), pid
        assert plain[1].parties[pid].state["received_generated"], pid  # the fixture asked for them
        assert torch.equal(st["data"].x, plain[1].parties[pid].state["data"].x)  # the same mended graph


def test_an_audit_of_fedsage_plus_asks_the_owners_to_keep_their_generator_views(tmp_path) -> None:
    from securefg.audit.auditor import prepare
    from securefg.audit.threat_model import ThreatModel
    from securefg.run_config import RunConfig

    tm = ThreatModel.load("curious_clients")
    assert {"generator_membership", "generator_reconstruction"} <= {a.attack for a in tm.attacks}
    plus = prepare(RunConfig(method="fedsage_plus", dataset="Cora"), tm, tmp_path)
    assert plus.options["keep_generator_views"] is True
    assert "keep_generator_views" not in prepare(RunConfig(method="fedsage", dataset="Cora"), tm, tmp_path).options


def test_fedsage_alone_sends_no_generator_messages() -> None:
    _, fed, out, _ = _run("fedsage", "fedsage_secure", rounds=2)
    assert {r.tag for r in fed.transcript} == {"fedavg/model", "fedavg/update", "fedavg/metrics"}
    assert out.summary["best_round"] in (0, 1) and 0.0 <= out.summary["test_acc"] <= 1.0


def test_score_on_owners_reads_the_owners_own_test_nodes_and_trains_the_same() -> None:
    whole = _run("fedsage", rounds=3)[2].summary
    owners = _run("fedsage", rounds=3, score_on="owners")[2].summary
    assert whole["scored_on"] == "global_graph" and owners["scored_on"] == "owners"
    assert owners["best_round"] == whole["best_round"]  # selection by the owners' validation in both
    assert owners["test_acc"] == owners["local_test_acc"] == whole["local_test_acc"]
    assert whole["test_acc"] == whole["global_graph_test_acc"] == owners["global_graph_test_acc"]
    per_owner = [s["global_test_acc"] for s in owners["per_client"].values()]
    assert owners["test_acc"] == pytest.approx(sum(per_owner) / len(per_owner))


def test_score_on_trained_reads_the_owners_models_after_local_training_as_fedavg_does() -> None:
    _, _, out, _ = _run("fedsage", rounds=3, score_on="trained")
    s, history = out.summary, out.history
    best = max(history, key=lambda h: h["mean_val"])  # FED-PUB's protocol: the trained models' validation
    assert s["scored_on"] == "trained" and s["best_round"] == best["round"] and s["best_val"] == best["mean_val"]
    per_owner = [c["test_acc"] for c in s["per_client"].values()]
    assert s["test_acc"] == best["mean_test"] == pytest.approx(sum(per_owner) / len(per_owner))
    assert s["local_test_acc"] == best["mean_global_test"]  # the broadcast model, before the local step


def test_unknown_score_on_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="score_on must be one of"):
        _run("fedsage", rounds=1, score_on="pooled")


def test_fewer_than_three_owners_with_the_cross_term_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="clients >= 3 or --option cross_weight=0"):
        _run(task=_task(clients=2), rounds=1)
    _, fed, _, _ = _run(task=_task(clients=2), rounds=1, cross_weight=0.0)  # local generators only
    assert not {TAG_GENERATED, TAG_FEATURE_GRAD} & {r.tag for r in fed.transcript}


# ----------------------------------------------------------------------- what owners read
def _raw_rows(task: NodeTask, owner: int) -> torch.Tensor:
    return task.clients[owner].x


def _embeddings(fed: Federation, pid: str) -> torch.Tensor:
    st = fed.parties[pid].state  # on its whole graph, and the impaired-graph ones the federated phase used
    return torch.cat([st["neighgen"].embed(st["original_data"].x, st["original_data"].edge_index).detach(), st["gen_z"]])


def _readable_rows(fed: Federation, pid: str, width: int) -> list[torch.Tensor]:
    """Everything ``pid`` can read as rows of width ``width``: decodable envelopes it received,
    sealed items it opened, its peer-sum results, and the recoveries ``x~ - d/2 * g`` that a
    gradient on its own generated vectors allows."""
    st = fed.parties[pid].state
    rows: list[torch.Tensor] = []
    for rec in fed.transcript:
        if rec.receiver != pid or rec.form not in (Form.PLAINTEXT, Form.AGGREGATE) or rec.payload is None:
            continue
        try:
            tensors = decode_tensors(rec.payload)
        except CodecError:  # a protocol message, not tensors
            tensors = {}
        for t in tensors.values():
            if t.is_floating_point() and t.numel() % width == 0:
                rows.append(t.double().reshape(-1, width))
                if rec.tag == TAG_FEATURE_GRAD:
                    sent = {r: x for r, x in st["sent_generated"]}
                    if rec.round in sent:
                        rows.append(sent[rec.round].double() - width / 2 * t.double().reshape(-1, width))
    opened = [x for _, _, x in st.get("received_generated", [])] + [g for _, _, g in st.get("feature_grad_sum", [])]
    rows += [x.double().reshape(-1, width) for x in opened if x.numel() % width == 0]
    if width == FEATURES:
        sent = {r: x for r, x in st["sent_generated"]}
        for r, peers, g in st.get("feature_grad_sum", []):
            rows.append(sent[r].double() - width / 2 * g.double().reshape(-1, width) / peers)
    return rows


def _matches(rows: list[torch.Tensor], secret: torch.Tensor, tol: float = 1e-3) -> int:
    secret = secret.double()
    return sum(int((torch.cdist(r, secret).min(1).values < tol).sum()) for r in rows if r.numel())


def test_under_the_protected_stack_no_owner_reads_another_owners_features_or_embeddings(secure) -> None:
    _, fed, _, task = secure
    for i, pid in enumerate(fed.client_ids):
        feats = _readable_rows(fed, pid, FEATURES)
        assert feats, "the owner opened generated items and a gradient sum"
        for j, other in enumerate(fed.client_ids):
            if j == i:
                continue
            assert _matches(feats, _raw_rows(task, j)) == 0, (pid, other)
            z = _embeddings(fed, other)
            assert _matches(_readable_rows(fed, pid, z.size(1)), z) == 0, (pid, other)
    forms = {r.form for r in fed.transcript if r.tag in (TAG_GENERATED, TAG_FEATURE_GRAD)}
    assert Form.PLAINTEXT not in forms and Form.SEALED in forms


def test_plaintext_control_finds_peers_raw_features_in_an_owners_view(plain) -> None:
    _, fed, _, task = plain
    found = 0
    for i, pid in enumerate(fed.client_ids):
        feats = _readable_rows(fed, pid, FEATURES)
        found += sum(_matches(feats, _raw_rows(task, j)) for j in range(len(fed.client_ids)) if j != i)
    assert found > 100  # every individual peer gradient gives back the matched rows exactly


def test_the_ledger_lists_both_generator_tags_as_unavoidable_releases_with_their_attacks() -> None:
    from securefg.audit.disclosures import by_design, method_assumptions

    assert "generator_membership" in by_design("fedsage_plus", TAG_GENERATED)
    assert "generator_reconstruction" in by_design("fedsage_plus", TAG_FEATURE_GRAD)
    assert by_design("fedsage", "fedavg/update") and not by_design("fedsage", TAG_GENERATED)
    assert any("colluding peer" in a for a in method_assumptions("fedsage_plus"))


def test_a_resumed_fedsage_plus_run_on_a_sparse_mended_graph_equals_an_uninterrupted_one(tmp_path, monkeypatch) -> None:
    """The mended graph carries its CSR adjacency (here forced at any size); the checkpoint leaves
    it out and the restore makes it again, so the resumed run trains on the same graph."""
    import securefg.methods.fedsage.method as fedsage_method
    from securefg.methods.training import state_of, with_sparse_adjacency

    monkeypatch.setattr(fedsage_method, "with_sparse_adjacency", lambda data: with_sparse_adjacency(data, min_messages=0))
    task = _task()

    def runner(rounds: int, resume: bool, out):
        m = method_class("fedsage_plus")(task, MethodConfig(
            rounds=4, train=TrainConfig(lr=0.01, weight_decay=5e-4, local_epochs=2), seed=0, hidden=16,
            options=dict(GEN_OPTIONS)))
        fed = Federation(m.num_clients, ProtocolStack.load("plaintext"), seed=0)
        RoundRunner(m, fed, rounds=rounds, out_dir=out, checkpoint_every=2, resume=resume, progress=False).run()
        return m, fed

    method, full = runner(4, False, tmp_path / "full")
    runner(2, False, tmp_path / "cut")
    _, resumed = runner(4, True, tmp_path / "cut")
    owner = full.client_ids[0]
    assert "adj_t" in full.parties[owner].state["data"] and "adj_t" in resumed.parties[owner].state["data"]
    assert "adj_t" not in method.checkpoint_party(full.parties[owner])["fedsage/mended"]["data"]
    a, b = state_of(full.parties[owner].state["model"]), state_of(resumed.parties[owner].state["model"])
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_sampled_mini_batches_train_fedsage_and_the_secure_sum_keeps_them_exact() -> None:
    """``fanouts`` (the paper's sampled mini-batches): more steps per round than full batch, a
    model that learns, and the same result under the protected stack (each owner draws its
    batches from its own generator, so the stack changes nothing the owners compute)."""
    _, _, full, _ = _run("fedsage", rounds=4)
    _, _, plain, _ = _run("fedsage", rounds=4, fanouts="5,5", batch_nodes=16)
    _, _, secure, _ = _run("fedsage", "fedsage_secure", rounds=4, fanouts="5,5", batch_nodes=16)
    assert plain.summary["test_acc"] > 0.6
    assert plain.summary["test_acc"] != full.summary["test_acc"] or plain.history != full.history
    assert secure.summary["test_acc"] == pytest.approx(plain.summary["test_acc"], abs=0.005)
    assert secure.summary["best_round"] == plain.summary["best_round"]


def test_a_resumed_sampled_fedsage_run_draws_the_same_batches_as_an_uninterrupted_one(tmp_path) -> None:
    """Each owner's batch generator is in its checkpoint, so the batches after a resume are the
    ones an uninterrupted run draws."""
    from securefg.methods.training import state_of

    task = _task()

    def runner(rounds: int, resume: bool, out):
        m = method_class("fedsage")(task, MethodConfig(
            rounds=4, train=TrainConfig(lr=0.01, weight_decay=5e-4, local_epochs=1), seed=0, hidden=16,
            options={"fanouts": "3,3", "batch_nodes": 16}))
        fed = Federation(m.num_clients, ProtocolStack.load("plaintext"), seed=0)
        RoundRunner(m, fed, rounds=rounds, out_dir=out, checkpoint_every=2, resume=resume, progress=False).run()
        return fed

    full = runner(4, False, tmp_path / "full")
    runner(2, False, tmp_path / "cut")
    resumed = runner(4, True, tmp_path / "cut")
    for owner in full.client_ids:
        a, b = state_of(full.parties[owner].state["model"]), state_of(resumed.parties[owner].state["model"])
        assert all(torch.equal(a[k], b[k]) for k in a)

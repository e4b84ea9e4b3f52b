import pytest
import torch

from securefg.data.synthetic import make_csbm, make_graph_classification
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.tasks import GraphTask, NodeTask
from securefg.methods.training import TrainConfig, state_of
from securefg.protocol.stack import ProtocolStack


def _node_task(n_clients=1, seed=0):
    g = make_csbm(num_nodes=240, num_classes=3, num_features=12, seed=seed)
    if n_clients == 1:
        return NodeTask(clients=[g], num_features=12, num_classes=3, full_graph=g)
    idx = torch.arange(g.num_nodes) % n_clients
    clients = [g.subgraph(idx == k) for k in range(n_clients)]
    return NodeTask(clients=clients, num_features=12, num_classes=3, full_graph=g)


def _run(name, task, rounds=15, stack="plaintext", **train):
    cfg = MethodConfig(rounds=rounds, train=TrainConfig(**train), seed=3, hidden=16)
    method = method_class(name)(task, cfg)
    fed = Federation(method.num_clients, ProtocolStack.load(stack), seed=3)
    out = RoundRunner(method, fed, rounds=rounds, progress=False).run()
    return method, fed, out


def test_one_client_full_batch_fedavg_equals_centralized_training():
    task = _node_task(1)
    _, fed_avg, _ = _run("fedavg", task)
    _, fed_cen, _ = _run("centralized", task)
    a, b = state_of(fed_avg.server.state["model"]), state_of(fed_cen.server.state["model"])
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5), k
    # and the run really trained: weights moved away from the initialisation
    init = state_of(method_class("fedavg")(task, MethodConfig(rounds=1, seed=3, hidden=16)).make_model())
    assert any(not torch.allclose(a[k], init[k]) for k in a)


def test_fedavg_server_sees_only_updates_and_metrics_through_the_stack():
    task = _node_task(3)
    _, fed, out = _run("fedavg", task, rounds=3)
    tags = {r.tag for r in fed.transcript}
    assert tags == {"fedavg/model", "fedavg/update", "fedavg/metrics"}
    ups = fed.transcript.records(tag="fedavg/update")
    assert {r.sender for r in ups} == {"client/0", "client/1", "client/2"} and {r.receiver for r in ups} == {"server"}
    assert len(out.history) == 3 and "per_client" in out.history[-1]


def test_fedprox_defaults_to_positive_mu_and_differs_from_fedavg():
    task = _node_task(3)
    m, fed_p, _ = _run("fedprox", task, rounds=5, local_epochs=3)
    assert m.config.train.prox_mu > 0
    _, fed_a, _ = _run("fedavg", task, rounds=5, local_epochs=3)
    a, p = state_of(fed_a.server.state["model"]), state_of(fed_p.server.state["model"])
    assert any(not torch.allclose(a[k], p[k]) for k in a)


def test_local_exchanges_nothing():
    _, fed, out = _run("local", _node_task(3), rounds=3)
    assert len(fed.transcript) == 0
    assert out.summary["test_acc"] == out.summary["test_acc"]  # not NaN


def test_graph_fedavg_learns_synthetic_structure_classes():
    graphs = make_graph_classification(num_graphs=180, num_classes=3, seed=0)
    feat = graphs[0].x.size(1)
    perm = torch.randperm(120, generator=torch.Generator().manual_seed(0)).tolist()
    train = [[graphs[i] for i in perm[k::3]] for k in range(3)]
    task = GraphTask(train=train, val=[graphs[120:135]] * 3, test=[graphs[135:150]] * 3,
                     global_test=graphs[150:], num_features=feat, num_classes=3)
    method, fed, out = _run("fedavg", task, rounds=15, lr=0.01, local_epochs=2)
    assert out.summary["test_auc"] > 0.8
    # the global model on the clients' pooled validation graphs, at the chosen round and the last
    at = next(h for h in out.history if h["round"] == out.summary["best_round"])
    assert out.summary["global_val_auc"] == at["global_val_auc"]
    pooled = [g for cid in fed.client_ids for g in fed.parties[cid].state["data"]["val"]]
    assert out.summary["final_global_val_auc"] == method.score_graphs(fed.server.state["model"], pooled)["auc"]


def test_unknown_method_option_is_rejected():
    from securefg.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown option"):
        method_class("fedavg")(_node_task(1), MethodConfig(rounds=1, options={"nope": 1}))


def _storages(obj, seen=None):
    """Every tensor storage reachable from a party's state (modules, optimizers, data)."""
    out = set()
    if isinstance(obj, torch.Tensor):
        if obj.numel():
            out.add(obj.untyped_storage().data_ptr())
    elif isinstance(obj, torch.nn.Module):
        for t in list(obj.parameters()) + list(obj.buffers()):
            out |= _storages(t)
    elif isinstance(obj, torch.optim.Optimizer):
        for st in obj.state.values():
            out |= _storages(st)
    elif isinstance(obj, dict):
        for v in obj.values():
            out |= _storages(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            out |= _storages(v)
    elif hasattr(obj, "to_dict"):
        out |= _storages(obj.to_dict())
    return out


def test_after_a_run_no_two_parties_share_any_tensor_memory():
    _, fed, _ = _run("fedavg", _node_task(3), rounds=3)
    per_party = {pid: _storages(p.state) for pid, p in fed.parties.items()}
    assert all(per_party[c] for c in fed.client_ids) and per_party["server"]
    pids = list(per_party)
    for i, a in enumerate(pids):
        for b in pids[i + 1 :]:
            assert not (per_party[a] & per_party[b]), f"{a} and {b} share tensor memory"


@pytest.mark.parametrize("stack, forms", [
    ("fedavg_secure_sum", {"keys", "masked"}),
    ("fedavg_ckks", {"keys", "ciphertext", "aggregate"}),  # the key holder returns the decrypted sum
])
def test_protected_fedavg_matches_plaintext_and_server_never_sees_an_unmasked_update(stack, forms):
    task = _node_task(3)
    _, fed_p, out_p = _run("fedavg", task, rounds=4)
    _, fed_s, out_s = _run("fedavg", task, rounds=4, stack=stack)
    assert abs(out_p.summary["test_acc"] - out_s.summary["test_acc"]) <= 0.005
    a, b = state_of(fed_p.server.state["model"]), state_of(fed_s.server.state["model"])
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-4), k
    seen = {r.form.value for r in fed_s.transcript.view("server") if r.tag == "fedavg/update" and r.sender.startswith("client/")}
    assert seen and seen <= forms and "plaintext" not in seen, seen


def test_node_clients_also_score_the_received_global_model_before_training():
    """The received-model score is the broadcast model's accuracy, not the locally stepped one."""
    from securefg.methods.training import evaluate_node, load_state

    task = _node_task(3)
    method, fed, out = _run("fedavg", task, rounds=2)
    # Round 2's broadcast model is the server model after round 1: recompute round 1 alone.
    _m1, fed1, _ = _run("fedavg", task, rounds=1)
    probe = method.make_model()
    load_state(probe, state_of(fed1.server.state["model"]))
    for k, cid in enumerate(fed.client_ids):
        scores = out.history[-1]["per_client"][cid]
        assert scores["global_test_acc"] == pytest.approx(evaluate_node(probe, task.clients[k])["test_acc"])
    summary = method.summarize(out.history)
    at = next(h for h in out.history if h["round"] == summary["best_round"])
    assert summary["global_model_test_acc"] == pytest.approx(at["mean_global_test"])
    assert summary["global_model_best_round"] in {h["round"] for h in out.history}


def test_fedsgd_with_one_client_is_full_batch_adam_on_the_server():
    """One client, no dropout: every round is one server Adam step on the client's gradient."""
    import torch.nn.functional as F

    task = _node_task(1)
    cfg = MethodConfig(rounds=4, train=TrainConfig(lr=0.01, weight_decay=5e-4), seed=3, hidden=16,
                       options={"dropout": 0.0})
    method = method_class("fedsgd")(task, cfg)
    fed = Federation(1, ProtocolStack.load("plaintext"), seed=3)
    RoundRunner(method, fed, rounds=4, progress=False).run()
    ref = method.make_model()
    opt = torch.optim.Adam(ref.parameters(), lr=0.01, weight_decay=5e-4)
    g = task.clients[0]
    for _ in range(4):
        opt.zero_grad()
        F.cross_entropy(ref(g.x, g.edge_index)[g.train_mask], g.y[g.train_mask]).backward()
        opt.step()
    got, want = state_of(fed.server.state["model"]), state_of(ref)
    assert got.keys() == want.keys()
    for k in got:
        assert torch.allclose(got[k], want[k], atol=1e-6), k
    init = state_of(method.make_model())
    assert all(not torch.allclose(got[k], init[k]) for k in got)  # every parameter was trained


def test_fedsgd_server_sees_only_masked_gradients_under_secure_sum():
    task = _node_task(3)
    _, fed, out = _run("fedsgd", task, rounds=2, stack="fedavg_secure_sum")
    forms = {r.form.value for r in fed.transcript.records(tag="fedavg/update") if r.receiver == "server"}
    assert forms <= {"keys", "masked"} and "masked" in forms
    _, _fed_plain, out_plain = _run("fedsgd", task, rounds=2, stack="plaintext")
    assert out.history[-1]["mean_test"] == pytest.approx(out_plain.history[-1]["mean_test"])


def test_fedsgd_rejects_unknown_backbone():
    from securefg.errors import ConfigError

    with pytest.raises(ConfigError, match="backbone"):
        method_class("fedsgd")(_node_task(1), MethodConfig(rounds=1, options={"backbone": "gat"}))

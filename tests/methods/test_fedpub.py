"""FED-PUB through the protocol layer: masks stay home, the proxy graph is public, protected = plaintext."""

from __future__ import annotations

import struct

import pytest
import torch

from securefg.data.synthetic import make_csbm
from securefg.errors import ConfigError
from securefg.federation.federation import Federation
from securefg.federation.program.context import ClientContext, ServerContext
from securefg.federation.program.driver import party_stack
from securefg.federation.program.exchange import ClientExchange, ServerExchange
from securefg.federation.program.inprocess import in_process_parties
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.fedpub import TAG_EMBEDDING, TAG_WEIGHTS
from securefg.methods.fedpub.client import train_local
from securefg.methods.fedpub.server import cap_peer_weights, softmax_weights
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig
from securefg.models.masked_gcn import MaskedGCN
from securefg.protocol.dp import privacy_report
from securefg.protocol.stack import ProtocolStack


def _task(n_clients: int = 4, seed: int = 0, features: int = 12) -> NodeTask:
    g = make_csbm(num_nodes=240, num_classes=3, num_features=features, seed=seed)
    idx = torch.arange(g.num_nodes) % n_clients
    return NodeTask(clients=[g.subgraph(idx == k) for k in range(n_clients)], num_features=features, num_classes=3)


def _method(task: NodeTask, rounds: int, **options):
    cfg = MethodConfig(rounds=rounds, train=TrainConfig(lr=0.01), seed=3, hidden=16, options=options)
    return method_class("fedpub")(task, cfg)


def _run(task: NodeTask, rounds: int = 3, stack: str = "plaintext", keep: bool = False, **options):
    method = _method(task, rounds, **options)
    fed = Federation(method.num_clients, ProtocolStack.load(stack), seed=3, extra_parties=method.extra_parties,
                     keep_payloads=keep)
    out = RoundRunner(method, fed, rounds=rounds, progress=False).run()
    return method, fed, out


def _windows(values: torch.Tensor, width: int = 4) -> list[bytes]:
    """Byte patterns of ``width`` consecutive entries as float32 and float64 (how tensors travel)."""
    v = values.detach().flatten().double()
    start = int(torch.nonzero(v != 1.0)[0])  # skip the untouched initial ones
    chunk = v[start : start + width].tolist()
    return [struct.pack(f"<{width}d", *chunk), struct.pack(f"<{width}f", *chunk)]


def _found(fed: Federation, patterns: list[bytes]) -> bool:
    return any(p in r.payload for r in fed.transcript if r.payload for p in patterns)


def test_masks_never_appear_in_any_transcript_entry_while_weights_do_in_plaintext() -> None:
    _, fed, _ = _run(_task(), rounds=3, keep=True)
    assert {r.tag for r in fed.transcript} == {"fedpub/model", "fedpub/embedding", "fedpub/weights", "fedpub/metrics"}
    for cid in fed.client_ids:
        model: MaskedGCN = fed.parties[cid].state["model"]
        for mask in model.masks():
            assert not _found(fed, _windows(mask)), f"{cid}'s mask travelled"
        # the control: the same search finds the weights this client uploaded in the last round
        assert _found(fed, _windows(model.conv1.lin.weight)), f"control failed for {cid}"


def test_proxy_graph_is_identical_across_clients_and_independent_of_data() -> None:
    proxies = []
    for seed in (0, 1):  # two different data sets, same public seed and feature size
        _, fed, _ = _run(_task(seed=seed), rounds=1)
        for cid in fed.client_ids:
            proxies.append(fed.parties[cid].state["proxy"])
    x0, e0 = proxies[0]
    assert x0.shape == (500, 12) and e0.shape[0] == 2 and e0.shape[1] > 0
    for x, e in proxies[1:]:
        assert torch.equal(x, x0) and torch.equal(e, e0)
    _, fed, _ = _run(_task(), rounds=1, proxy_seed=7)
    x7, _ = fed.parties["client/0"].state["proxy"]
    assert not torch.equal(x7, x0)
    # blocks: 5 x 100 nodes, and with p_out = 0 no edge crosses a block
    _, fed, _ = _run(_task(), rounds=1, proxy_p_out=0.0)
    _, e = fed.parties["client/0"].state["proxy"]
    assert torch.equal(e[0] // 100, e[1] // 100)


def _programs(stack: str, n_clients: int = 4):
    """Party-program halves for ``stack`` on the in-process backend (server, clients, keyholder),
    with a client action ``test/run`` that runs ``job[pid](cli)`` as that client."""
    stack_ = ProtocolStack.load(stack)
    clients = [f"client/{k}" for k in range(n_clients)]
    parties = in_process_parties(["server", *clients, "keyholder"])
    srv = ServerContext(ServerExchange(parties.server, party_stack(stack_), seed=0))
    srv.exchange.round = 0
    job: dict = {}
    for pid, rt in parties.clients.items():
        ex = ClientExchange(rt, party_stack(stack_), seed=1, clients=clients, helpers=["keyholder"])
        rt.on("test/run", lambda step, ex=ex, pid=rt.party.pid: job[pid](ClientContext(ex, step)))
    return parties, srv, job


def test_encrypted_cosine_equals_plaintext_cosine() -> None:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(128, generator=g, dtype=torch.float64)
    vecs = {f"client/{k}": base + 0.5 * k * torch.randn(128, generator=g, dtype=torch.float64) for k in range(4)}
    results = []
    for stack in ("fedpub_ckks", "plaintext"):
        _, srv, job = _programs(stack)
        job.update({pid: (lambda cli, v=v: cli.offer_similarity(TAG_EMBEDDING, v)) for pid, v in vecs.items()})
        srv.ask("test/run")
        results.append(srv.similarity(TAG_EMBEDDING, metric="cosine"))
    (order_c, sim_c), (order_p, sim_p) = results
    assert order_c == order_p
    assert torch.allclose(sim_c, sim_p, atol=1e-5)
    assert float((sim_p - sim_p.mean()).abs().max()) > 0.1  # a matrix with structure, not all ones


def test_personalized_ckks_aggregate_equals_the_plaintext_weighted_sum() -> None:
    g = torch.Generator().manual_seed(1)
    shapes = {"conv1.lin.weight": (16, 12), "conv1.bias": (16,), "clsif.weight": (3, 16)}
    thetas = {f"client/{k}": {n: torch.randn(*s, generator=g, dtype=torch.float64) for n, s in shapes.items()}
              for k in range(4)}
    alpha = cap_peer_weights(softmax_weights(torch.rand(4, 4, generator=g) * 2 - 1, tau=3.0), 0.5)
    order = sorted(thetas)
    coeffs = {a: {b: float(alpha[r, c]) for c, b in enumerate(order)} for r, a in enumerate(order)}
    parties, srv, job = _programs("fedpub_ckks")
    job.update({pid: (lambda cli, t=t: cli.offer_personalized(TAG_WEIGHTS, t)) for pid, t in thetas.items()})
    srv.ask("test/run")
    assert srv.personalized_aggregate(TAG_WEIGHTS, coeffs) == order
    got: dict = {}
    job.update({pid: (lambda cli: got.__setitem__(cli.pid, cli.personalized(TAG_WEIGHTS))) for pid in thetas})
    srv.ask("test/run")
    for i, row in coeffs.items():
        for n in shapes:
            want = sum(a * thetas[j][n] for j, a in row.items())
            assert float((got[i][n] - want).norm() / want.norm()) < 1e-6
    # each result went to its own client only, as a ciphertext
    results = [r for r in parties.transcript if r.tag == TAG_WEIGHTS and r.sender == "server" and r.form.value == "ciphertext"]
    assert sorted(r.receiver for r in results if r.stage.endswith("result")) == order


def test_weight_cap_holds_and_keeps_rows_stochastic() -> None:
    g = torch.Generator().manual_seed(2)
    sims = [torch.rand(6, 6, generator=g) * 2 - 1 for _ in range(20)]
    sims.append(torch.eye(6) * 0 + torch.tensor([[1.0 if (i, j) in ((0, 1), (1, 0)) or i == j else -1.0 for j in range(6)]
                                                  for i in range(6)]))  # client 0 and 1: twins
    for sim in sims:
        for tau in (3.0, 10.0):
            raw = softmax_weights(sim, tau)
            for cap in (0.05, 0.2, 0.5):
                alpha = cap_peer_weights(raw, cap)
                off = alpha - torch.diag(alpha.diagonal())
                assert float(off.max()) <= cap + 1e-12
                assert torch.allclose(alpha.sum(1), torch.ones(6, dtype=torch.float64))
                assert (alpha >= 0).all()
            assert torch.equal(cap_peer_weights(raw, 1.0), raw)
    twins = cap_peer_weights(softmax_weights(sims[-1], 10.0), 0.2)
    assert float(twins[0, 1]) == pytest.approx(0.2) and float(twins[0, 0]) > 0.5  # the excess went home, not to strangers
    with pytest.raises(ConfigError):
        cap_peer_weights(twins, 0.0)


def test_weight_cap_binds_in_a_run_and_is_reported() -> None:
    method, fed, _ = _run(_task(), rounds=2, max_peer_weight=0.05)
    rep = method.report()["fedpub"]
    assert rep["largest_peer_weight_before_cap"] > 0.05 and rep["rounds_cap_bound"] == 2
    assert rep["largest_peer_weight_sent"] <= 0.05 + 1e-12
    alpha = fed.server.state["alpha"]
    assert all(w <= 0.05 + 1e-12 for i, row in alpha.items() for j, w in row.items() if j != i)


def test_protected_stack_equals_plaintext_on_a_small_run() -> None:
    runs = {stack: _run(_task(), rounds=3, stack=stack) for stack in ("fedpub_ckks", "plaintext")}
    (_, fc, oc), (_, fp, op) = runs["fedpub_ckks"], runs["plaintext"]
    for cid in fp.client_ids:
        pc, pp = fc.parties[cid].state["personal"], fp.parties[cid].state["personal"]
        for k in pp:
            assert torch.allclose(pc[k], pp[k], atol=1e-5), (cid, k)
        assert oc.history[-1]["per_client"][cid]["test_acc"] == op.history[-1]["per_client"][cid]["test_acc"]
    # and the protected run really was protected: the server read no model or embedding in the clear
    clear = {r.tag for r in fc.transcript.view("server") if r.form.value == "plaintext"}
    assert clear <= {"fedpub/model"}


def test_dp_stack_noises_the_embeddings_and_reports_epsilon() -> None:
    _, fed, _ = _run(_task(), rounds=2, stack="fedpub_dp")
    report = privacy_report(fed.parties, stack=ProtocolStack.load("fedpub_dp"))
    assert 0 < report["epsilon"] < float("inf")
    releases = [rel for c in report["clients"].values() for rel in c["client"]["releases"]]
    assert len(releases) == 4 and {(r["tag"], r["mode"], r["steps"]) for r in releases} == {("fedpub/embedding", "local", 2)}
    # the server's similarity comes from noised vectors: it is not the clean one
    _, fed_plain, _ = _run(_task(), rounds=2)
    assert fed.server.state["alpha"] != fed_plain.server.state["alpha"]


def test_l1_modes() -> None:
    data = make_csbm(num_nodes=60, num_classes=3, num_features=8, seed=0)
    data.x[:, 0] = 0.0  # feature 0 never occurs: its weights get no cross-entropy gradient
    lr, l1, steps = 0.01, 1e-3, 5
    masks = {}
    for mode in ("proximal", "gradient", "reference"):
        torch.manual_seed(0)
        model = MaskedGCN(8, 3, hidden_channels=4)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        train_local(model, opt, data, None, epochs=steps, l1=l1, loc_l2=0.0, l1_mode=mode)
        masks[mode] = model.conv1.lin.mask.detach()[:, 0]
    assert torch.allclose(masks["proximal"], torch.full((4,), 1 - steps * lr * l1))  # soft threshold only
    assert torch.equal(masks["reference"], torch.ones(4))  # the reference's detached regulariser never acts
    assert float(masks["gradient"].max()) < 1 - 0.5 * steps * lr  # Adam turns lambda1 * sign into ~lr steps


@pytest.mark.parametrize("options, match", [
    ({"tau": -1}, "tau"), ({"max_peer_weight": 0}, "max_peer_weight"), ({"max_peer_weight": 1.5}, "max_peer_weight"),
    ({"l1_mode": "lasso"}, "l1_mode"), ({"l1": "abc"}, "l1"), ({"proxy_p_out": 2.0}, "p_out"), ({"bogus": 1}, "unknown"),
])
def test_bad_options_are_refused(options, match) -> None:
    with pytest.raises(ConfigError, match=match):
        _method(_task(), 1, **options)


def test_fedpub_refuses_graph_tasks() -> None:
    from securefg.data.synthetic import make_graph_classification
    from securefg.methods.tasks import GraphTask

    graphs = make_graph_classification(num_graphs=12, seed=0)
    task = GraphTask(train=[graphs[:6]], val=[graphs[6:9]], test=[graphs[9:]], global_test=graphs[9:],
                     num_features=int(graphs[0].num_features), num_classes=2)
    with pytest.raises(ConfigError, match="node"):
        method_class("fedpub")(task, MethodConfig(rounds=1))


def test_checkpoint_restores_the_personalised_models() -> None:
    task = _task()
    method, fed, _ = _run(task, rounds=2)
    state = method.checkpoint(fed)
    fresh = _method(task, 2)
    fed2 = Federation(fresh.num_clients, ProtocolStack.load("plaintext"), seed=3, extra_parties=fresh.extra_parties)
    fresh.setup(fed2)
    fresh.restore(fed2, state)
    for cid in fed.client_ids:
        for k, v in fed.parties[cid].state["personal"].items():
            assert torch.equal(fed2.parties[cid].state["personal"][k], v)
        a, b = fed.parties[cid].state["model"].state_dict(), fed2.parties[cid].state["model"].state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_models_and_proxy_graph_live_on_the_configured_device() -> None:
    task = _task()
    cfg = MethodConfig(rounds=1, train=TrainConfig(lr=0.01), seed=3, hidden=16, device=torch.device("cuda"))
    method = method_class("fedpub")(task, cfg)
    fed = Federation(method.num_clients, ProtocolStack.load("plaintext"), seed=3, extra_parties=method.extra_parties)
    RoundRunner(method, fed, rounds=1, progress=False).run()
    for cid in fed.client_ids:
        state = fed.parties[cid].state
        assert all(p.is_cuda for p in state["model"].parameters())
        assert all(t.is_cuda for t in state["proxy"])

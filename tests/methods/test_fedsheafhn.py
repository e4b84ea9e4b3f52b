"""FedSheafHN through the protocol layer: pseudonymous embeddings, sealed weights, DP, protected = plaintext."""

from __future__ import annotations

import pytest
import torch

from securefg.data.synthetic import make_csbm
from securefg.errors import AuthenticationError, ConfigError, InvalidInputError, ProtocolError
from securefg.federation.envelope import Form
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.fedsheafhn import STRUCTURAL_LEAK, TAG_EMBEDDING, TAG_FEEDBACK, TAG_WEIGHTS
from securefg.methods.fedsheafhn.client import client_embedding, install_generated
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig
from securefg.protocol.dp import privacy_report
from securefg.protocol.relay.mailbox import pseudonym_key, pseudonym_of
from securefg.protocol.stack import ProtocolStack

TAGS = {"fedsheafhn/embedding", "fedsheafhn/weights", "fedsheafhn/feedback", "fedsheafhn/metrics"}


def _task(n_clients: int = 4, features: int = 12) -> NodeTask:
    g = make_csbm(num_nodes=240, num_classes=3, num_features=features, seed=0)
    g.x = g.x + 0.5 * torch.randn(g.x.shape, generator=torch.Generator().manual_seed(5))  # not saturated
    idx = torch.arange(g.num_nodes) % n_clients
    return NodeTask(clients=[g.subgraph(idx == k) for k in range(n_clients)], num_features=features, num_classes=3)


def _method(task: NodeTask, rounds: int, **options):
    options = {"warmup_epochs": 3, "refresh_every": 2, "knn": 2, "hn_hidden": 8, **options}
    cfg = MethodConfig(rounds=rounds, train=TrainConfig(lr=0.02, weight_decay=5e-4, local_epochs=2), seed=3, hidden=16,
                       options=options)
    return method_class("fedsheafhn")(task, cfg)


def _run(stack: str = "plaintext", rounds: int = 3, keep: bool = False, **options):
    method = _method(_task(), rounds, **options)
    fed = Federation(method.num_clients, ProtocolStack.load(stack), seed=3, extra_parties=method.extra_parties,
                     keep_payloads=keep)
    out = RoundRunner(method, fed, rounds=rounds, progress=False).run()
    return method, fed, out


def _raw_embeddings(fed: Federation) -> dict[str, torch.Tensor]:
    return {cid: client_embedding(fed.parties[cid].state["model"], fed.parties[cid].state["data"]) for cid in fed.client_ids}


def test_small_end_to_end_run_learns_and_uses_only_its_tags() -> None:
    method, fed, out = _run(rounds=4)
    assert {r.tag for r in fed.transcript} == TAGS
    assert out.summary["test_acc"] > 0.6  # 3 classes: chance is 1/3
    assert [h["round"] for h in out.history] == [0, 1, 2, 3]
    assert all(v["feedback_norm"] > 0 for v in out.server_view)
    rep = method.report()["fedsheafhn"]
    assert rep["generated_floats_per_client"] == 12 * 16 + 16 + 16 * 16 + 16
    assert rep["structural_leak"] == STRUCTURAL_LEAK


def test_protected_stack_without_dp_equals_plaintext_exactly() -> None:
    _, _, plain = _run("plaintext", rounds=3)
    _, _, secure = _run("fedsheafhn_secure", rounds=3)
    assert plain.history == secure.history
    assert [v["feedback_norm"] for v in plain.server_view] == [v["feedback_norm"] for v in secure.server_view]


def test_under_mailbox_the_server_talks_only_to_the_shuffler_and_sees_no_client_id() -> None:
    _, fed, _ = _run("fedsheafhn_secure", rounds=2)
    server_view = [r for r in fed.transcript if "server" in (r.sender, r.receiver)
                   and r.tag in (TAG_EMBEDDING, TAG_FEEDBACK, TAG_WEIGHTS) and r.form is not Form.KEYS]
    assert server_view and all({r.sender, r.receiver} == {"server", "shuffler"} for r in server_view)
    assert all(r.form is Form.SEALED for r in server_view)
    order = fed.server.state["sheafhn"].order
    assert not set(order) & set(fed.client_ids)
    nyms = {pseudonym_of(fed.parties[cid].state["mech/pseudonym"][fed.transport.session.hex()].public_bytes)
            for cid in fed.client_ids}
    assert set(order) == nyms


def test_generated_weights_reach_only_their_client() -> None:
    _, fed, _ = _run("fedsheafhn_secure", rounds=1, keep=True)
    deliveries = [r for r in fed.transcript if r.tag == TAG_WEIGHTS and r.stage == "mailbox/deliver"]
    assert sorted(r.receiver for r in deliveries) == sorted(fed.client_ids)  # one box per client, nobody else
    # each box opens only with its owner's pseudonym key: another client's key fails
    box = next(r for r in deliveries if r.receiver == "client/0").payload
    from securefg.protocol.mechanism import ExchangeCall
    from securefg.protocol.relay import sealing_directory
    from securefg.protocol.relay.constants import item_binding

    call = ExchangeCall(transport=fed.transport, parties=fed.parties, round=0, tag=TAG_WEIGHTS)
    owner, other = pseudonym_key(call, "client/0"), pseudonym_key(call, "client/1")
    server_key = sealing_directory.own_key(call, "server").public_bytes  # replies are sealed by the server's key
    binding = item_binding(call, pseudonym_of(owner.public_bytes), b"mailbox/reply")
    owner.open(box, context=binding, sender_public=server_key)
    with pytest.raises(AuthenticationError):
        other.open(box, context=binding, sender_public=server_key)
    with pytest.raises(AuthenticationError, match="failed authentication"):  # nor without the server's key
        owner.open(box, context=binding)
    # and what client i installed is row i of the hypernetwork output, under its pseudonym
    server = fed.server.state["sheafhn"]
    assert len(server.order) == len(fed.client_ids)


def test_reply_delivers_each_output_to_the_owner_of_its_pseudonym() -> None:
    method = _method(_task(), 1)
    fed = Federation(method.num_clients, ProtocolStack.load("fedsheafhn_secure"), seed=3,
                     extra_parties=method.extra_parties)
    fed.set_round(0)
    got = fed.exchange.collect(TAG_EMBEDDING, {cid: {"x": torch.full((3,), float(k))}
                                               for k, cid in enumerate(fed.client_ids)})
    assert not set(got) & set(fed.client_ids)
    back = fed.exchange.reply(TAG_WEIGHTS, {nym: {"w": t["x"] * 10} for nym, t in got.items()})
    for k, cid in enumerate(fed.client_ids):
        assert torch.equal(back[cid]["w"], torch.full((3,), 10.0 * k, dtype=torch.float64))
    with pytest.raises(ProtocolError, match="never collected"):
        fed.exchange.reply(TAG_WEIGHTS, {"0123456789abcdef": {"w": torch.zeros(3, dtype=torch.float64)}})


def test_under_dp_the_server_never_holds_a_raw_embedding() -> None:
    _, fed, _ = _run("fedsheafhn_dp", rounds=2, refresh_every=1)
    raw = torch.stack(list(_raw_embeddings(fed).values())).float()  # the clients' last (refreshed) embeddings
    held = fed.server.state["sheafhn"].x0
    dist = torch.cdist(held, raw)
    assert float(dist.min()) > 1.0  # sigma 4 on 16 dims: the noise norm is ~16, a unit signal is buried


def test_dp_report_counts_every_embedding_release() -> None:
    _, fed, _ = _run("fedsheafhn_dp", rounds=3, refresh_every=1)
    rep = privacy_report(fed.parties, stack=fed.stack)
    assert rep["epsilon"] is not None and 0 < rep["epsilon"] < float("inf")
    assert set(rep["clients"]) == set(fed.client_ids)
    assert "fedsheafhn/embedding" in repr(rep["clients"]["client/0"])


def test_collect_rejects_server_side_noise() -> None:
    stack = ProtocolStack.from_dict({"name": "bad", "tags": {"fedsheafhn/*": {"mechanism": "plaintext"},
        TAG_EMBEDDING: {"mechanism": "plaintext", "transforms": [
            {"name": "dp_gaussian", "mode": "central", "noise_multiplier": 1.0, "clip": 1.0}]}}})
    fed = Federation(2, stack)
    with pytest.raises(ConfigError, match="server-side step"):
        fed.exchange.collect(TAG_EMBEDDING, {cid: {"x": torch.ones(3)} for cid in fed.client_ids})


def test_mailbox_without_a_shuffler_party_is_a_config_error() -> None:
    fed = Federation(2, ProtocolStack.load("fedsheafhn_secure"))
    with pytest.raises(ConfigError, match="shuffler"):
        fed.exchange.collect(TAG_EMBEDDING, {cid: {"x": torch.ones(3)} for cid in fed.client_ids})


def test_bad_generated_weights_and_options_raise_typed_errors() -> None:
    method = _method(_task(), 1)
    model = method.make_model()
    with pytest.raises(InvalidInputError, match="shape"):
        install_generated(model, {n: torch.zeros(1) for n, p in model.named_parameters() if n.startswith("conv")})
    good = {n: torch.full_like(p, float("nan")) for n, p in model.named_parameters() if n.startswith("conv")}
    with pytest.raises(InvalidInputError, match="NaN"):
        install_generated(model, good)
    with pytest.raises(ConfigError, match="feedback_sign"):
        _method(_task(), 1, feedback_sign="up")
    with pytest.raises(ConfigError, match="knn"):
        _method(_task(), 1, knn=-1)


def test_pfedhn_sign_moves_generated_weights_towards_the_fine_tuned_ones() -> None:
    """One server step with the pFedHN sign shrinks ||omega~ - omega~_Tc||; the paper's sign grows it."""
    gaps = {}
    for sign in ("pfedhn", "paper"):
        method = _method(_task(), 1, feedback_sign=sign, hn_dropout=0.0, sheaf_dropout=0.0)
        fed = Federation(method.num_clients, ProtocolStack.load("plaintext"), seed=3, extra_parties=method.extra_parties)
        RoundRunner(method, fed, rounds=1, progress=False).run()  # one round of the party programs
        server = fed.server.state["sheafhn"]
        before = server.generate()
        targets = {cid: {n: t + 0.05 for n, t in before[cid].items()} for cid in fed.client_ids}
        server.update({cid: {n: targets[cid][n] - before[cid][n] for n in before[cid]} for cid in fed.client_ids})
        after = server.generate()
        def gap(g, targets=targets):
            return sum(float((g[c][n] - targets[c][n]).norm()) for c in g for n in g[c])

        gaps[sign] = (gap(before), gap(after))
    assert gaps["pfedhn"][1] < gaps["pfedhn"][0]
    assert gaps["paper"][1] > gaps["paper"][0]


def _sparse_run(stack: str):
    task = _task()
    for k, c in enumerate(task.clients):  # bag-of-words-like: each client lacks a third of the vocabulary
        c.x = c.x.abs() * torch.tensor([float((f + k) % 3 != 0) for f in range(c.x.shape[1])])
    method = _method(task, 2)
    fed = Federation(method.num_clients, ProtocolStack.load(stack), seed=3, extra_parties=method.extra_parties)
    RoundRunner(method, fed, rounds=2, progress=False).run()
    return fed


def test_feedback_probe_inverts_updates_on_every_stack_and_the_mailbox_only_unlinks() -> None:
    from securefg.attacks.sheaf_feedback import probe_feedback

    plain, secure = probe_feedback(_sparse_run("plaintext")), probe_feedback(_sparse_run("fedsheafhn_secure"))
    for p in (plain, secure):
        assert p["inversion_rel_error"] < 1e-5  # the structural leak: exact reconstruction
        assert p["feature_auc"] > 0.6
    assert plain["linkage_accuracy"] == 1.0 and not plain["pseudonymous"]
    assert secure["pseudonymous"] and plain["attributed_feature_auc"] == plain["feature_auc"]


def test_weight_decay_of_generated_layers_is_its_own_option() -> None:
    method = _method(_task(), 1)
    model = method.make_model()
    groups = method.optimizer_for(model).param_groups
    generated = {id(p) for n, p in model.named_parameters() if n.startswith(("conv1.", "conv2."))}
    assert [g["weight_decay"] for g in groups] == [5e-4, 5e-4]
    assert {id(p) for p in groups[0]["params"]} == generated
    assert _method(_task(), 1, generated_wd=1e-3).optimizer_for(model).param_groups[0]["weight_decay"] == 1e-3
    with pytest.raises(ConfigError, match="generated_wd"):
        _method(_task(), 1, generated_wd=-1.0)


def _warm_layers_sent(stack: str) -> tuple[list[bytes], list[torch.Tensor]]:
    """Run one warm-started round keeping the warm-start payloads; return them and what clients sent."""
    method = _method(_task(), 1, warm_start="secure_mean")
    sent: list[torch.Tensor] = []
    handle = method.handle_warm_layers

    def recording(client):
        out = handle(client)
        sent.append(torch.cat([t.reshape(-1) for t in out.values()]))
        return out

    method.handle_warm_layers = recording  # type: ignore[method-assign]
    fed = Federation(method.num_clients, ProtocolStack.load(stack), seed=3, extra_parties=method.extra_parties,
                     keep_payloads=True)
    RoundRunner(method, fed, rounds=1, progress=False).run()
    payloads = [r.payload for r in fed.transcript if r.tag == "fedsheafhn/warm_start" and r.payload]
    return payloads, sent


def _holds(payload: bytes, vec: torch.Tensor) -> bool:
    head = vec[:16]
    return any(head.to(dt).numpy().tobytes() in payload for dt in (torch.float32, torch.float64))


def test_secure_mean_warm_start_sends_no_single_clients_layers() -> None:
    payloads, sent = _warm_layers_sent("fedsheafhn_secure")
    assert payloads and len(sent) == 4
    assert not any(_holds(p, v) for p in payloads for v in sent)
    payloads, sent = _warm_layers_sent("plaintext")  # the control finds them
    assert all(any(_holds(p, v) for p in payloads) for v in sent)


def test_secure_mean_warm_start_protected_equals_plaintext_and_changes_the_start() -> None:
    _, _, plain = _run("plaintext", rounds=2, warm_start="secure_mean")
    _, _, secure = _run("fedsheafhn_secure", rounds=2, warm_start="secure_mean")
    _, _, init = _run("plaintext", rounds=2)
    assert plain.history == secure.history
    assert plain.history != init.history


def test_set_base_rejects_wrong_names_sizes_and_nan() -> None:
    method, fed, _ = _run(rounds=1)
    server = fed.server.state["sheafhn"]
    good = method.handle_warm_layers(fed.parties[fed.client_ids[0]])
    server.set_base(good)
    flat = torch.cat([t.reshape(-1) for t in good.values()])
    assert torch.equal(server.hn.out.bias.detach(), flat)
    first, last = next(iter(good)), list(good)[-1]
    with pytest.raises(InvalidInputError, match="names"):
        server.set_base({first: good[first]})
    with pytest.raises(InvalidInputError, match="values"):
        server.set_base({**good, last: torch.zeros(3)})
    with pytest.raises(InvalidInputError, match="NaN"):
        server.set_base({**good, last: torch.full_like(good[last], float("nan"))})
    with pytest.raises(ConfigError, match="warm_start"):
        _method(_task(), 1, warm_start="mean")


@pytest.mark.parametrize("kind", ["sgd", "fedavg_bias"])
def test_sgd_hypernetwork_step_of_one_over_n_moves_the_shared_bias_by_the_mean_update(kind: str) -> None:
    """Under ``hn_optimizer = "sgd"`` the output bias's step is ``hn_lr * sum_i Delta_i``: at
    ``hn_lr = 1/N`` the shared part follows the clients' mean fine-tuned weights (a FedAvg step);
    ``"fedavg_bias"`` takes that step on the bias whatever ``hn_lr`` (Adam's) is."""
    task = _task()
    method = _method(task, 1, hn_optimizer=kind, hn_lr=1.0 / len(task.clients) if kind == "sgd" else 0.01)
    fed = Federation(method.num_clients, ProtocolStack.load("plaintext"), seed=3, extra_parties=method.extra_parties)
    RoundRunner(method, fed, rounds=1, progress=False).run()  # one round of the party programs
    server = fed.server.state["sheafhn"]
    assert isinstance(server.hn_opt, torch.optim.SGD if kind == "sgd" else torch.optim.Adam)
    generated = server.generate()
    gen = torch.Generator().manual_seed(0)
    deltas = {c: {n: 0.01 * torch.randn(t.shape, generator=gen) for n, t in generated[c].items()} for c in generated}
    bias = server.hn.out.bias.detach().clone()
    server.update(deltas)
    mean = torch.stack([torch.cat([deltas[c][n].reshape(-1) for n in server.hn.shapes]) for c in deltas]).mean(dim=0)
    torch.testing.assert_close(server.hn.out.bias.detach() - bias, mean, rtol=1e-4, atol=1e-6)
    with pytest.raises(ConfigError, match="hn_optimizer"):
        _method(task, 1, hn_optimizer="rmsprop")


def test_cosine_schedule_decays_the_hypernetwork_step_over_the_rounds() -> None:
    _, fed, _ = _run(rounds=3, hn_lr_schedule="cosine", hn_lr=0.01)
    lr = fed.server.state["sheafhn"].hn_opt.param_groups[0]["lr"]
    assert lr == pytest.approx(0.0, abs=1e-12)  # 3 of 3 updates: cos(pi) -> 0
    with pytest.raises(ConfigError, match="hn_lr_schedule"):
        _method(_task(), 1, hn_lr_schedule="step")

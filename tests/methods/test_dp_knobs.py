"""The DP knobs on two by-design releases: FedSheafHN's feedback (``fedsheafhn_feedback_dp``, the
generic local ``dp_gaussian`` on a collect tag) and FedSage+'s generated features (``fedsage_dp``,
the tag's ``dp_gaussian`` applied per generated vector by the sending owner): the noise is drawn by
the sender, epsilon is reported, the stacks load, and a relay refuses transforms nobody applies."""

from __future__ import annotations

import pytest
import torch

from securefg.data.partition import LouvainPartitioner, client_subgraphs
from securefg.data.splits import with_node_split
from securefg.data.synthetic import make_csbm
from securefg.errors import ConfigError
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.fedsage.federated import TAG_GENERATED, GeneratedDP, generated_dp, noise_generated
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig
from securefg.protocol.dp import privacy_report
from securefg.protocol.stack import ProtocolStack


def _transform(stack: str, tag: str) -> dict:
    (t,) = ProtocolStack.load(stack).content()["bindings"][tag]["transforms"]
    return t


@pytest.mark.parametrize(("stack", "tag"), [("fedsheafhn_feedback_dp", "fedsheafhn/feedback"),
                                            ("fedsage_dp", TAG_GENERATED)])
def test_the_knob_stacks_load_with_one_local_gaussian_on_the_released_tag(stack: str, tag: str) -> None:
    t = _transform(stack, tag)
    assert t["name"] == "dp_gaussian" and t["mode"] == "local" and t["noise_multiplier"] > 0 and t["clip"] > 0
    assert stack in ProtocolStack.load(stack).description or "unit" in ProtocolStack.load(stack).description.lower()


# ------------------------------------------------------------------------------- FedSage+
FEATURES = 16
GEN = {"gen_local_steps": 10, "gen_fed_steps": 3, "gen_batch": 16, "gen_hidden": 32, "num_pred": 3,
       "keep_generator_views": True}


def _sage_task() -> NodeTask:
    g = make_csbm(num_nodes=240, num_classes=3, num_features=FEATURES, seed=0)
    g.x = g.x + 0.3 * torch.randn(g.x.shape, generator=torch.Generator().manual_seed(1))
    g = with_node_split(g, ratios=(0.6, 0.2, 0.2), seed=0)
    return NodeTask(clients=client_subgraphs(g, LouvainPartitioner(3, seed=0)(g)), num_features=FEATURES,
                    num_classes=3, full_graph=g)


def _sage_run(stack: ProtocolStack):
    m = method_class("fedsage_plus")(_sage_task(), MethodConfig(
        rounds=1, train=TrainConfig(lr=0.01, weight_decay=5e-4, local_epochs=1), seed=0, hidden=16, options=dict(GEN)))
    fed = Federation(m.num_clients, stack, seed=0)
    RoundRunner(m, fed, rounds=1, progress=False).run()
    return m, fed


def _sage_stack(noise: float, clip: float = 1.0) -> ProtocolStack:
    d = ProtocolStack.load("fedsage_dp").content()
    d["tags"] = d.pop("bindings")
    d["tags"][TAG_GENERATED]["transforms"] = [{"name": "dp_gaussian", "mode": "local", "noise_multiplier": noise,
                                               "clip": clip}]
    return ProtocolStack.from_dict({k: v for k, v in d.items() if k in ("name", "description", "tags")})


def test_noise_generated_clips_each_vector_on_its_own() -> None:
    flat = torch.cat([torch.full((1, 4), 0.1), torch.full((1, 4), 10.0)])  # norms 0.2 and 20
    out = noise_generated(flat, GeneratedDP(1e-9, 1.0), None)
    assert torch.allclose(out[0], flat[0], atol=1e-6)  # under the clip: untouched (a whole-payload clip would shrink it)
    assert float(out[1].norm()) == pytest.approx(1.0, abs=1e-6)


def test_fedsage_owner_noises_what_it_sends_and_the_run_reports_a_node_level_epsilon() -> None:
    m, fed = _sage_run(_sage_stack(2.0))
    for cid in fed.client_ids:
        st = fed.parties[cid].state
        assert st["gen_dp_releases"] == GEN["gen_fed_steps"]
        sent = torch.cat([x for _, x in st["sent_generated"]])
        # tanh outputs clipped to 1 plus N(0, 2^2) per coordinate on 16 dims: norms about 8
        assert float(sent.norm(dim=1).median()) > 4.0
    # what a peer opened is exactly what the owner sent: the noise was drawn before sealing, by the sender
    opened = {(r, o): x for r, o, x in fed.parties["client/1"].state["received_generated"]}
    for r, x in fed.parties["client/0"].state["sent_generated"]:
        assert torch.equal(opened[(r, "client/0")], x)
    p = m.report()["privacy"]
    assert p["unit"] == "node" and p["noise_multiplier"] == 2.0 and p["clip_per"] == "generated vector"
    assert 0 < p["epsilon"] < p["epsilon_client"] < float("inf")
    assert {c["releases"] for c in p["clients"].values()} == {GEN["gen_fed_steps"]}
    less = _sage_run(_sage_stack(8.0))[0].report()["privacy"]["epsilon"]
    assert less < p["epsilon"]  # more noise, smaller epsilon: noise_multiplier is the knob


def test_fedsage_without_a_transform_reports_no_privacy_and_refuses_central_noise() -> None:
    assert generated_dp(ProtocolStack.load("fedsage_secure")) is None
    bad = ProtocolStack.from_dict({"name": "bad", "tags": {"*": {"mechanism": "plaintext"}, TAG_GENERATED: {
        "mechanism": "plaintext", "transforms": [{"name": "dp_gaussian", "mode": "central", "noise_multiplier": 1.0,
                                                 "clip": 1.0}]}}})
    with pytest.raises(ConfigError, match="local"):
        generated_dp(bad)


def test_a_relay_refuses_transforms_no_method_applies() -> None:
    stack = ProtocolStack.from_dict({"name": "bad", "tags": {"x/relay": {"mechanism": "plaintext", "transforms": [
        {"name": "dp_gaussian", "mode": "local", "noise_multiplier": 1.0, "clip": 1.0}]}}})
    fed = Federation(3, stack)
    with pytest.raises(ConfigError, match="opaque items"):
        fed.exchange.relay("x/relay", {cid: b"item" for cid in fed.client_ids})


# ----------------------------------------------------------------------------- FedSheafHN
def _sheaf_run(stack: str):
    g = make_csbm(num_nodes=240, num_classes=3, num_features=12, seed=0)
    g.x = g.x + 0.5 * torch.randn(g.x.shape, generator=torch.Generator().manual_seed(5))
    idx = torch.arange(g.num_nodes) % 4
    task = NodeTask(clients=[g.subgraph(idx == k) for k in range(4)], num_features=12, num_classes=3)
    cfg = MethodConfig(rounds=2, train=TrainConfig(lr=0.02, weight_decay=5e-4, local_epochs=2), seed=3, hidden=16,
                       options={"warmup_epochs": 3, "refresh_every": 2, "knn": 2, "hn_hidden": 8})
    m = method_class("fedsheafhn")(task, cfg)
    fed = Federation(m.num_clients, ProtocolStack.load(stack), seed=3, extra_parties=m.extra_parties)
    RoundRunner(m, fed, rounds=2, progress=False).run()
    return fed


def test_fedsheafhn_server_holds_only_noised_feedback_and_epsilon_covers_it() -> None:
    from securefg.attacks.sheaf_feedback import probe_feedback

    fed = _sheaf_run("fedsheafhn_feedback_dp")
    srv = fed.server.state["sheafhn"]
    for delta in srv.last_feedback.values():
        v = torch.cat([t.flatten() for t in delta.values()])
        assert float(v.norm()) > 5.0  # clip 1 plus N(0, 1) on several hundred coordinates
    probe = probe_feedback(fed)
    assert probe["inversion_rel_error"] > 0.5  # the exact inversion of fedsheafhn_secure is gone
    rep = privacy_report(fed.parties, stack=fed.stack)
    tags = {r["tag"] for c in rep["clients"].values() for r in c["client"]["releases"]}
    assert tags == {"fedsheafhn/embedding", "fedsheafhn/feedback"}
    emb_only = privacy_report(_sheaf_run("fedsheafhn_dp").parties)["epsilon"]
    assert rep["epsilon"] > emb_only > 0

"""Methods written as party programs, run over Flower (one OS process per party) and in process.

Each test runs one small configuration on both backends and checks that they agree: the same
metrics (CKKS: within its noise), the same sealed envelopes, the same bytes per tag (CKKS
ciphertext and context sizes, which move slightly between encryptions, excepted).
"""

from collections import Counter

import pytest

pytest.importorskip("flwr")

from securefg.experiment import RunConfig, run_experiment
from securefg.federation.envelope import Form
from securefg.federation.party import client_id
from securefg.federation.transcript import Transcript, load_jsonl
from securefg.integrations.flower.launcher import run_flower_experiment
from tests.integrations.flower_checks import (
    assert_every_party_exited,
    assert_same_traffic,
    record_counts,
    transcripts,
)

# CeFGC under protocols/cefgc.toml: every package sealed end to end to every other client
# (sealed_relay, with its sealing-key directory), W0 in the clear, the GIN weights through
# SecAgg+. MUTAG-sized synthetic graphs (6-16 nodes); one pass of phase 1, one Langevin step per
# noise level, three GIN epochs: the protocol is full size.
CEFGC_TINY = {"diffusion_epochs": 1, "diffusion_batch": 64, "langevin_steps": 1, "tune_samples": 4, "gnn_epochs": 3,
              "max_nodes": 16, "synthetic_ratio": 0.2}


def test_cefgc_under_the_sealed_relay_over_flower_matches_the_in_process_backend(tmp_path):
    # phase 1 is offline and cached per client: the Flower clients train and write it, the
    # in-process run loads the same generators
    cfg = RunConfig(method="cefgc", dataset="synthetic-graphs", clients=3, rounds=1, seed=1, progress=False,
                    protocol="cefgc",  # the sealed relay and SecAgg+ alone: exact (the default adds CKKS sketches)
                    options={**CEFGC_TINY, "generator_cache": str(tmp_path / "generators")})
    work = tmp_path / "w"
    fl = run_flower_experiment(cfg, workdir=work)
    ip = run_experiment(cfg)
    assert_every_party_exited(fl, ["server", *(client_id(k) for k in range(3))])
    assert fl["protocol"] == ip["protocol"] == "cefgc"
    assert [c["phase1"]["cached"] for c in fl["cefgc"]["clients"].values()] == [False] * 3
    assert [c["phase1"]["cached"] for c in ip["cefgc"]["clients"].values()] == [True] * 3
    # nothing noisy on this stack (sealed boxes, exact secure sums): the same synthetic graphs,
    # the same global GIN, the same scores
    for c in ("received_models", "synthetic", "local", "units", "gnn_epochs"):
        assert [v[c] for v in fl["cefgc"]["clients"].values()] == [v[c] for v in ip["cefgc"]["clients"].values()], c
    for key in ("mean_val", "mean_test", "global_test_acc", "global_test_auc", "global_val_auc"):
        assert [h[key] for h in fl["history"]] == [h[key] for h in ip["history"]], key
    assert fl["metrics"]["test_auc"] == ip["metrics"]["test_auc"]
    assert fl["metrics"]["test_acc"] == ip["metrics"]["test_acc"]
    # the same envelopes and bytes: sealed boxes are padded by a fixed rule, sealing keys and
    # SecAgg+ messages have fixed sizes
    assert_same_traffic(fl, ip)
    assert fl["paper_rounds"] == ip["paper_rounds"]
    flower_tr, inproc_tr = transcripts(work, ip)
    assert record_counts(flower_tr) == record_counts(inproc_tr)
    # the server only ever handled sealed boxes of the models (and the clients' sealing keys and
    # relay membership secrets, which it forwarded between clients without reading them)
    for tr in (flower_tr, inproc_tr):
        forms = {(r.stage, r.form) for r in tr if r.tag == "cefgc/model"}
        assert forms == {("sealing/publish", Form.KEYS), ("relay/membership", Form.KEYS),
                         ("relay/upload", Form.SEALED), ("relay/forward", Form.SEALED)}
        assert all(r.sender != "server" and r.receiver != "server" for r in tr if r.stage == "relay/membership")


def test_fedstruct_under_its_secure_stack_over_flower_matches_the_in_process_backend(tmp_path):
    # fedstruct_secure (the default before the norm filter; the paper table's protected column),
    # FedStruct-B with Hop2Vec: Algorithm 3's peer sums with
    # each target client as the SecAgg+ aggregator and the server as a relay that adds the masked
    # inputs (relay_sum), NSFs through the sealed relay, θ broadcast as bfloat16, gradients and
    # counts through SecAgg+, the summed NSF gradient through blind_sum (group key set up first)
    cfg = RunConfig(method="fedstruct", dataset="csbm", clients=3, rounds=2, seed=5, progress=False,
                    protocol="fedstruct_secure", options={"structure_hops": 2, "structure_dim": 8})
    work = tmp_path / "w"
    fl = run_flower_experiment(cfg, workdir=work)
    ip = run_experiment(cfg)
    assert_every_party_exited(fl, ["server", *(client_id(k) for k in range(3))])
    assert fl["protocol"] == ip["protocol"] == "fedstruct_secure"
    # same seed, same per-party RNG streams, exact (fixed-point) sums: the same scores
    for key in ("mean_val", "mean_test"):
        assert [h[key] for h in fl["history"]] == [h[key] for h in ip["history"]], key
    assert fl["metrics"]["test_acc"] == ip["metrics"]["test_acc"]
    assert [v["server_val_acc"] for v in fl["flower"]["server_view"]] == [h["mean_val"] for h in ip["history"]]
    # the offline phase's report: what the server saw (hops, peer sums) and its bytes in the transcript
    for part in ("abar", "nsf_share"):
        for k in ("bytes", "wire_bytes", "hops", "peer_sums", "nonzeros_sent", "tag"):
            assert fl["offline"][part].get(k) == ip["offline"][part].get(k), (part, k)
    assert fl["offline"]["abar"]["bytes"] == ip["bytes_by_tag"]["fedstruct/abar"] > 0
    # the same envelopes and bytes (SecAgg+ messages, sealed boxes and the clear θ have fixed sizes)
    assert_same_traffic(fl, ip)
    flower_tr, inproc_tr = transcripts(work, ip)
    assert record_counts(flower_tr) == record_counts(inproc_tr)
    for tr in (flower_tr, inproc_tr):
        # the relay only forwards Ā's masked inputs (summed) and sealed stage messages; the
        # target alone unmasks; the server never reads the summed NSF gradient
        abar = {(r.sender, r.form) for r in tr if r.tag == "fedstruct/abar"}
        assert abar and {f for _, f in abar} <= {Form.KEYS, Form.MASKED, Form.SEALED}
        grads = {r.form for r in tr if r.tag == "fedstruct/nsf_grad" and "server" in (r.sender, r.receiver)}
        assert grads and grads <= {Form.KEYS, Form.MASKED, Form.SEALED}


def test_fedstructs_default_norm_filter_over_flower_matches_the_in_process_backend(tmp_path):
    # fedstruct_secure_robust: the key holder (its own process) judges every client's gradient on
    # its encrypted sketch (norm filter), θ's kept gradients through SecAgg+ (masked_robust), ∇S's
    # through the blind sum with the key holder's sketch sum sealed to every client (blind_robust)
    cfg = RunConfig(method="fedstruct", dataset="csbm", clients=3, rounds=2, seed=5, progress=False,
                    options={"structure_hops": 2, "structure_dim": 8})
    work = tmp_path / "w"
    fl = run_flower_experiment(cfg, workdir=work)
    ip = run_experiment(cfg)
    assert fl["protocol"] == ip["protocol"] == "fedstruct_secure_robust"
    assert_every_party_exited(fl, ["server", *(client_id(k) for k in range(3)), "keyholder"])
    for key in ("mean_val", "mean_test"):  # exact sums, and the filter keeps every honest client
        assert [h[key] for h in fl["history"]] == [h[key] for h in ip["history"]], key
    flower_tr, inproc_tr = transcripts(work, ip)
    for tr in (flower_tr, inproc_tr):
        grads = {(r.stage, r.form) for r in tr if r.tag == "fedstruct/nsf_grad" and r.receiver == "server"}
        assert grads and {f for _, f in grads} <= {Form.KEYS, Form.MASKED, Form.SEALED, Form.CIPHERTEXT}
        assert ("blind_robust/release", Form.SEALED) in grads  # the key holder's boxes, forwarded unread
        boxes = {r.receiver for r in tr if r.stage == "blind_robust/release/forward"}
        assert boxes == {client_id(k) for k in range(3)}


def test_fedsheafhn_under_the_mailbox_over_flower_matches_the_in_process_backend(tmp_path):
    # fedsheafhn_secure (named: the default, fedsheafhn_feedback_dp, draws its noise from the OS
    # CSPRNG, so two runs differ): embeddings and feedback collected through the shuffler (its own
    # process) under session pseudonyms, generated weights sealed back to each pseudonym's owner,
    # metrics through SecAgg+; refresh_every=1 collects a new embedding in round 1
    options = {"warmup_epochs": 2, "refresh_every": 1, "knn": 1, "hn_hidden": 8, "sheaf_hidden": 4, "sheaf_layers": 2}
    cfg = RunConfig(method="fedsheafhn", protocol="fedsheafhn_secure", dataset="csbm", clients=3, rounds=2, seed=5,
                    hidden=8, local_epochs=2, progress=False, options=options)
    work = tmp_path / "w"
    fl = run_flower_experiment(cfg, workdir=work)
    ip = run_experiment(cfg)
    assert_every_party_exited(fl, ["server", "shuffler", *(client_id(k) for k in range(3))])
    assert fl["protocol"] == ip["protocol"] == "fedsheafhn_secure"
    # same seed, same per-party RNG streams, rows in the embeddings' own order (not the
    # pseudonyms', which each run redraws), exact secure sums: the same scores
    for key in ("mean_val", "mean_test"):
        assert [h[key] for h in fl["history"]] == pytest.approx([h[key] for h in ip["history"]], abs=1e-9), key
    assert fl["metrics"]["test_acc"] == pytest.approx(ip["metrics"]["test_acc"], abs=1e-9)
    assert [v["round"] for v in fl["flower"]["server_view"]] == [0, 1]
    assert all(v["feedback_norm"] > 0 for v in fl["flower"]["server_view"])
    assert fl["fedsheafhn"]["generated_floats_per_client"] == ip["fedsheafhn"]["generated_floats_per_client"]
    # the same envelopes, shuffler traffic included, and the same bytes (sealed boxes are padded
    # by a fixed rule, so their sizes do not depend on the keys)
    assert fl["envelopes"] == ip["envelopes"]
    assert fl["bytes_by_tag"] == ip["bytes_by_tag"]
    assert fl["wire_bytes_total"] == ip["wire_bytes_total"]
    flower_tr, inproc_tr = transcripts(work, ip)
    assert record_counts(flower_tr) == record_counts(inproc_tr)
    # the server talked to no client about the pseudonymous tags (sealing keys aside)
    for tr in (flower_tr, inproc_tr):
        assert not [r for r in tr if r.tag in ("fedsheafhn/embedding", "fedsheafhn/feedback", "fedsheafhn/weights")
                    and "server" in (r.sender, r.receiver) and "shuffler" not in (r.sender, r.receiver)
                    and r.form is not Form.KEYS]


# CeFGC under protocols/cefgc.toml: every package sealed end to end to every other client
# (sealed_relay, with its sealing-key directory), W0 in the clear, the GIN weights through
# SecAgg+. MUTAG-sized synthetic graphs (6-16 nodes); one pass of phase 1, one Langevin step per
# noise level, three GIN epochs: the protocol is full size.
CEFGC_TINY = {"diffusion_epochs": 1, "diffusion_batch": 64, "langevin_steps": 1, "tune_samples": 4, "gnn_epochs": 3,
              "max_nodes": 16, "synthetic_ratio": 0.2}


def test_fedpub_under_ckks_over_flower_matches_the_in_process_backend(tmp_path):
    pytest.importorskip("tenseal")
    # fedpub_ckks (named: the default, fedpub_dp, draws its embedding noise from the OS CSPRNG, so
    # two runs differ): CKKS similarity of the proxy-graph embeddings, CKKS personalised mixes, CKKS
    # metric sums, with the keyholder in its own process
    cfg = RunConfig(method="fedpub", protocol="fedpub_ckks", dataset="csbm", clients=3, rounds=2, seed=5, hidden=8,
                    local_epochs=10, lr=0.05, progress=False)
    work = tmp_path / "w"
    fl = run_flower_experiment(cfg, workdir=work)
    ip = run_experiment(cfg)
    assert_every_party_exited(fl, ["server", "keyholder", *(client_id(k) for k in range(3))])
    assert fl["protocol"] == ip["protocol"] == "fedpub_ckks"
    # same seed, same per-party RNG streams; CKKS flooding (~1e-6) on the cosines and mixes only
    for key in ("mean_val", "mean_test", "mean_mask_density"):
        assert [h[key] for h in fl["history"]] == pytest.approx([h[key] for h in ip["history"]], abs=1e-6), key
    assert fl["metrics"]["test_acc"] == pytest.approx(ip["metrics"]["test_acc"], abs=1e-6)
    for fv, iv in zip(fl["flower"]["server_view"], ip["history"]):
        assert fv["round"] == iv["round"]
    assert fl["fedpub"]["largest_peer_weight_sent"] == pytest.approx(ip["fedpub"]["largest_peer_weight_sent"], abs=1e-4)
    assert fl["fedpub"]["rounds_cap_bound"] == ip["fedpub"]["rounds_cap_bound"]
    # the same envelopes: every (round, tag, stage, sender, receiver, form), keyholder traffic included
    assert fl["envelopes"] == ip["envelopes"]
    assert fl["communication_rounds"] == ip["communication_rounds"]
    flower_tr = Transcript()
    load_jsonl(work / "transcript.jsonl", flower_tr)
    inproc_tr = ip["_federation"].transcript

    def key(r):
        return (r.round, r.tag, r.stage, r.sender, r.receiver, r.form)

    assert Counter(map(key, flower_tr)) == Counter(map(key, inproc_tr))
    # bytes: exact for the clear model broadcast, sealing keys and released values; CKKS
    # ciphertexts and contexts are compressed random polynomials whose serialized size moves
    # between any two encryptions, on either backend (measured: up to ~0.5% between two
    # in-process runs, ~0.9% once for a 3-value metrics upload; per-tag totals ~0.2%)
    assert fl["bytes_by_tag"]["fedpub/model"] == ip["bytes_by_tag"]["fedpub/model"]
    assert fl["bytes_by_tag"].keys() == ip["bytes_by_tag"].keys()

    def sizes(tr):
        out = Counter()
        for r in tr:
            out[key(r)] += r.payload_bytes
        return out

    fl_sizes, ip_sizes = sizes(flower_tr), sizes(inproc_tr)
    for k, v in ip_sizes.items():
        if k[5] in (Form.CIPHERTEXT, Form.KEYS) and k[2] != "sealing/publish":
            assert fl_sizes[k] == pytest.approx(v, rel=3e-2), k
        else:
            assert fl_sizes[k] == v, k
    for tag, v in ip["bytes_by_tag"].items():
        assert fl["bytes_by_tag"][tag] == pytest.approx(v, rel=1e-2), tag


def test_fedsage_plus_under_its_secure_stack_over_flower_matches_the_in_process_backend(tmp_path):
    # fedsage_secure (named: FedSage+'s default, fedsage_dp, draws its noise from the OS CSPRNG, so
    # two runs differ): the federated NeighGen phase (Method.server_prepare) relays each owner's
    # generated features sealed end to end (sealed_relay) and returns each owner the sum of its
    # peers' feature gradients (peer_sum: SecAgg+ with the owner as the aggregator, the server a
    # relay); then FedSage on the mended graphs, FedAvg's secure sums
    options = {"gen_local_steps": 5, "gen_fed_steps": 2, "gen_batch": 16, "gen_hidden": 16}
    cfg = RunConfig(method="fedsage_plus", protocol="fedsage_secure", dataset="csbm", clients=3, rounds=2, seed=5,
                    hidden=8, local_epochs=2, progress=False, options=options)
    work = tmp_path / "w"
    fl = run_flower_experiment(cfg, workdir=work)
    ip = run_experiment(cfg)
    assert_every_party_exited(fl, ["server", *(client_id(k) for k in range(3))])
    assert fl["protocol"] == ip["protocol"] == "fedsage_secure"
    # same seed, same per-party RNG streams, exact sums: the same generators, mended graphs, scores
    assert fl["fedsage"] == ip["fedsage"]
    for key in ("mean_val", "mean_test", "global_graph_test_acc"):
        assert [h[key] for h in fl["history"]] == [h[key] for h in ip["history"]], key
    assert fl["metrics"]["test_acc"] == ip["metrics"]["test_acc"]
    assert fl["envelopes"] == ip["envelopes"]
    assert fl["bytes_by_tag"] == ip["bytes_by_tag"]
    assert fl["wire_bytes_total"] == ip["wire_bytes_total"]
    flower_tr, inproc_tr = transcripts(work, ip)
    assert record_counts(flower_tr) == record_counts(inproc_tr)
    for tr in (flower_tr, inproc_tr):  # the server handles no generated feature or gradient in the clear
        forms = {r.form for r in tr if r.tag in ("fedsage/generated", "fedsage/feature_grad")}
        assert forms and forms <= {Form.KEYS, Form.MASKED, Form.SEALED}

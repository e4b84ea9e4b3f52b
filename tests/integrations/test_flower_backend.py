"""The Flower backend: every party in its own OS process over Flower's gRPC transport.

These start real processes (a server and three clients on loopback), so they are the slow
end of the suite; each uses the small synthetic CSBM task and a hidden size of 8.
"""

import time
from collections import Counter

import pytest
import torch

pytest.importorskip("flwr")

from securefg.errors import CheckpointError
from securefg.experiment import RunConfig, run_experiment
from securefg.federation.envelope import Form
from securefg.federation.party import client_id
from securefg.federation.transcript import Transcript, load_jsonl
from securefg.integrations.flower.launcher import run_flower_experiment
from securefg.integrations.flower.party import out_file


def _cfg(**kw):
    # SecAgg+ over Flower: FedAvg's default adds multi-Krum (fedavg_secure_robust), a case of its own
    base = {"method": "fedavg", "dataset": "csbm", "clients": 3, "rounds": 2, "seed": 5, "hidden": 8, "local_epochs": 10, "lr": 0.05,
            "progress": False, "protocol": "fedavg_secure_sum"}
    return RunConfig(**{**base, **kw})


def test_fedavg_secure_sum_over_flower_matches_the_in_process_backend(tmp_path):
    fl = run_flower_experiment(_cfg(), workdir=tmp_path / "work")
    ip = run_experiment(_cfg())
    assert fl["flower"]["processes"] == {"server": 0, **{client_id(k): 0 for k in range(3)}}
    assert fl["protocol"] == ip["protocol"] == "fedavg_secure_sum"
    # same seed, same per-party RNG streams, exact secure sums: the same accuracies
    assert [h["mean_val"] for h in fl["history"]] == pytest.approx([h["mean_val"] for h in ip["history"]], abs=1e-9)
    assert fl["metrics"]["test_acc"] == pytest.approx(ip["metrics"]["test_acc"], abs=1e-9)
    # the same sealed envelopes: identical payload and wire byte counts, per tag
    assert fl["bytes_by_tag"] == ip["bytes_by_tag"]
    assert fl["wire_bytes_total"] == ip["wire_bytes_total"]
    assert fl["envelopes"] == ip["envelopes"]
    assert fl["communication_rounds"] == ip["communication_rounds"]
    assert fl["flower"]["dropped"] == {}


def test_client_process_killed_mid_round_is_a_dropout_and_the_round_sums_the_survivors(tmp_path):
    # four clients: with three, a death after the masked input leaves each survivor's self-mask
    # seed with a single share holder, below t = 2, and SecAgg+ rightly aborts the round
    work = tmp_path / "work"
    victim = client_id(3)

    def kill_inside_the_secure_sum(procs):
        steps = out_file(work, victim, "steps")
        deadline = time.monotonic() + 900
        while not (steps.exists() and "0 aggregate fedavg/update secure_sum/share_keys" in steps.read_text()):
            if time.monotonic() > deadline:
                pytest.fail("the victim never reached share_keys:\n" + procs.log_tail(victim) + procs.log_tail("server"))
            time.sleep(0.005)
        procs.kill(victim)  # SIGKILL inside round 0's update secure sum

    res = run_flower_experiment(_cfg(rounds=2, clients=4), workdir=work, on_start=kill_inside_the_secure_sum)
    assert res["flower"]["processes"]["server"] == 0
    assert res["flower"]["processes"][victim] == -9
    reason = res["flower"]["dropped"][victim]
    assert reason.startswith("aggregate fedavg/update secure_sum/") and " r0: " in reason
    view = res["flower"]["server_view"]
    # dead before its masked input reached the server: not in round 0's update sum (the
    # survivors' shares remove its pairwise masks); dead after it: in the sum (its self-mask
    # seed comes back from the survivors' shares at unmask)
    in_update = 4 if reason.startswith("aggregate fedavg/update secure_sum/unmask") else 3
    assert [v["contributors"] for v in view] == [in_update, 3]
    assert [v["metric_contributors"] for v in view] == [3, 3]
    # round 0's metric sum is exactly the survivors' mean validation accuracy
    survivors = [torch.load(out_file(work, client_id(k), "measure.0.pt"), weights_only=True) for k in (0, 1, 2)]
    assert view[0]["server_mean_val"] == pytest.approx(sum(s["val_acc"] for s in survivors) / 3, abs=1e-6)
    assert res["metrics"]["final_round"] == 1  # and the run went on to the end without it


# the synthetic graphs have 6-16 nodes; one pass of phase 1 and one Langevin step per noise
# level keep it small: the protocol (CKKS keys with Galois keys, similarity, relay, sum) is full size
CEFGC_FAST = {"diffusion_epochs": 1, "diffusion_batch": 64, "langevin_steps": 1, "tune_samples": 4, "gnn_epochs": 3,
              "max_nodes": 16, "synthetic_ratio": 0.2}


def test_cefgc_plus_under_ckks_over_flower_matches_the_in_process_backend(tmp_path):
    pytest.importorskip("tenseal")
    # phase 1 is offline and cached per client (the method's generator_cache): the Flower
    # clients train and write it, the in-process run loads the same generators
    cfg = RunConfig(method="cefgc_plus", dataset="synthetic-graphs", clients=3, rounds=1, seed=1, progress=False,
                    options={**CEFGC_FAST, "generator_cache": str(tmp_path / "generators")})
    work = tmp_path / "work"
    fl = run_flower_experiment(cfg, workdir=work)
    ip = run_experiment(cfg)
    assert [c["phase1"]["cached"] for c in fl["cefgc"]["clients"].values()] == [False] * 3
    assert [c["phase1"]["cached"] for c in ip["cefgc"]["clients"].values()] == [True] * 3
    # one OS process per party, the CKKS key holder included, and all of them finished cleanly
    assert fl["flower"]["processes"] == {"server": 0, "keyholder": 0, **{client_id(k): 0 for k in range(3)}}
    assert fl["protocol"] == ip["protocol"] == "cefgc_plus"
    # the same pairing and, through CKKS (~1e-6 noise on the relayed models and the summed
    # weights), the same synthetic graphs and the same global GIN
    assert fl["cefgc"]["server_learned"]["partners"] == ip["cefgc"]["server_learned"]["partners"]
    assert fl["metrics"]["test_acc"] == pytest.approx(ip["metrics"]["test_acc"], abs=1e-9)
    assert fl["metrics"]["test_auc"] == pytest.approx(ip["metrics"]["test_auc"], abs=1e-4)
    assert [c["synthetic"] for c in fl["cefgc"]["clients"].values()] == [c["synthetic"] for c in ip["cefgc"]["clients"].values()]
    # the same envelopes: every (tag, stage, sender, receiver, form), keyholder traffic included
    flower_tr = Transcript()
    load_jsonl(work / "transcript.jsonl", flower_tr)
    inproc_tr = ip["_federation"].transcript

    def key(r):
        return (r.tag, r.stage, r.sender, r.receiver, r.form)

    assert Counter(map(key, flower_tr)) == Counter(map(key, inproc_tr))
    assert fl["communication_rounds"] == ip["communication_rounds"] == 3
    assert [f["direction"] for f in fl["flights"]] == [f["direction"] for f in ip["flights"]] == ["up", "down", "up"]
    # bytes: exact where the payload size is fixed (W0, released sums, sealing keys); CKKS
    # ciphertexts and contexts are compressed random polynomials whose serialized size moves
    # between any two encryptions on either backend (~0.01% for ciphertexts, ~0.1% for a
    # sealed secret key)
    def sizes(tr):
        out = {}
        for r in tr:
            out[key(r)] = out.get(key(r), 0) + r.payload_bytes
        return out

    fl_sizes, ip_sizes = sizes(flower_tr), sizes(inproc_tr)
    for k, v in ip_sizes.items():
        if k[4] in (Form.CIPHERTEXT, Form.KEYS) and k[1] != "sealing/publish":
            assert fl_sizes[k] == pytest.approx(v, rel=5e-3), k
        else:
            assert fl_sizes[k] == v, k
    assert fl["bytes_total"] == pytest.approx(ip["bytes_total"], rel=1e-3)


@pytest.mark.parametrize("start", ["fork-from-launcher", "start-up-process"])
def test_an_interrupted_flower_run_resumes_from_each_partys_own_checkpoint(tmp_path, monkeypatch, start):
    if start == "start-up-process":  # as when the launcher itself may not fork (threads, gRPC)
        monkeypatch.setattr("securefg.integrations.flower.forked.can_fork_here", lambda: False)
    # plaintext: bit-reproducible, so the resumed run must equal the straight one exactly
    base = {"protocol": "plaintext", "rounds": 4}
    straight = run_experiment(_cfg(**base))
    out = tmp_path / "run"
    ckpt = out / "flower" / "parties" / "server.checkpoint.pt"

    def interrupt_after_round_2(procs):
        deadline = time.monotonic() + 300
        while not (ckpt.exists() and torch.load(ckpt, weights_only=True)["next_round"] >= 2):
            if time.monotonic() > deadline:
                pytest.fail("no round-2 checkpoint:\n" + procs.log_tail("server"))
            time.sleep(0.005)
        for pid in ("server", *(client_id(k) for k in range(3))):
            procs.kill(pid)  # the whole run dies (a power cut), after every party saved round 2

    with pytest.raises(Exception, match="server process failed"):
        run_flower_experiment(_cfg(**base, out=str(out), checkpoint_every=2), on_start=interrupt_after_round_2)
    resumed = run_flower_experiment(_cfg(**base, out=str(out), checkpoint_every=2, resume=True))
    assert [h["round"] for h in resumed["history"]] == [0, 1, 2, 3]
    assert [h["mean_val"] for h in resumed["history"]] == pytest.approx([h["mean_val"] for h in straight["history"]],
                                                                         abs=1e-12)
    # each party reloaded its transcript of rounds 0-1: the byte counts are the whole run's
    assert resumed["bytes_by_tag"] == straight["bytes_by_tag"]
    assert resumed["envelopes"] == straight["envelopes"]


def test_resuming_a_flower_run_without_checkpoints_names_the_folder(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint to resume from"):
        run_flower_experiment(_cfg(out=str(tmp_path / "run"), resume=True))


def test_the_dp_stack_over_flower_reports_the_same_privacy_block_as_in_process(tmp_path):
    # the noise is drawn from the OS CSPRNG (secure_rng), so metrics differ; what was released,
    # about whom and with what sigma does not: every party's ledger is read into the report
    fl = run_flower_experiment(_cfg(protocol="fedavg_dp"), workdir=tmp_path / "work")
    ip = run_experiment(_cfg(protocol="fedavg_dp"))
    assert fl["privacy"]["epsilon"] == pytest.approx(ip["privacy"]["epsilon"]) and fl["privacy"]["epsilon"] > 0
    assert set(fl["privacy"]["clients"]) == set(ip["privacy"]["clients"]) == {client_id(k) for k in range(3)}
    assert fl["envelopes"] == ip["envelopes"] and fl["bytes_by_tag"] == ip["bytes_by_tag"]


def test_the_robust_option_over_flower_sums_the_same_subgroups_as_in_process(tmp_path):
    options = {"robust": "median", "robust_k": 3}
    fl = run_flower_experiment(_cfg(clients=6, options=options), workdir=tmp_path / "work")
    ip = run_experiment(_cfg(clients=6, options=options))
    assert fl["protocol"] == ip["protocol"] == "fedavg_secure_sum+robust-median-k3"
    assert [h["mean_val"] for h in fl["history"]] == pytest.approx([h["mean_val"] for h in ip["history"]], abs=1e-9)
    assert fl["envelopes"] == ip["envelopes"] and fl["bytes_by_tag"] == ip["bytes_by_tag"]

import pytest
import torch

from securefg.data.synthetic import make_csbm
from securefg.errors import CheckpointError
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.tasks import NodeTask
from securefg.methods.training import state_of
from securefg.protocol.stack import ProtocolStack


def _task():
    g = make_csbm(num_nodes=180, num_classes=3, num_features=8, seed=1)
    idx = torch.arange(g.num_nodes) % 3
    return NodeTask(clients=[g.subgraph(idx == k) for k in range(3)], num_features=8, num_classes=3, full_graph=g)


class Interrupted(Exception):
    pass


def _runner(tmp_path, stack, *, interrupt_at=None, resume=False, rounds=4):
    torch.manual_seed(0)
    cls = method_class("fedavg")

    class Flaky(cls):  # type: ignore[misc, valid-type]
        def run_round(self, fed, r):
            if r == interrupt_at:
                raise Interrupted
            return super().run_round(fed, r)

    method = Flaky(_task(), MethodConfig(rounds=rounds, seed=5, hidden=8))
    fed = Federation(3, ProtocolStack.load(stack), seed=5)
    return RoundRunner(method, fed, rounds=rounds, out_dir=tmp_path, checkpoint_every=2, resume=resume,
                       fingerprint="cfg", progress=False), fed


@pytest.mark.parametrize("stack", ["plaintext", "fedavg_dp"])
def test_resumed_run_equals_uninterrupted_run(tmp_path, stack):
    straight, fed_a = _runner(tmp_path / "a", stack)
    straight.run()
    first, _ = _runner(tmp_path / "b", stack, interrupt_at=3)
    with pytest.raises(Interrupted):
        first.run()
    second, fed_b = _runner(tmp_path / "b", stack, resume=True)
    out_b = second.run()
    assert out_b.resumed_from == 2
    assert [h["round"] for h in out_b.history] == [0, 1, 2, 3]
    if stack == "plaintext":  # DP noise comes from the OS CSPRNG, so only plaintext is bit-reproducible
        a, b = state_of(fed_a.server.state["model"]), state_of(fed_b.server.state["model"])
        for k in a:
            assert torch.allclose(a[k], b[k], atol=1e-6), k
    if stack == "fedavg_dp":  # the privacy ledger survived the interruption
        from securefg.protocol.dp import privacy_report

        eps_a, eps_b = privacy_report(fed_a.parties)["epsilon"], privacy_report(fed_b.parties)["epsilon"]
        assert eps_a > 0 and eps_a == pytest.approx(eps_b)
    # the transcript of the first two rounds was reloaded: byte counts agree
    assert fed_b.transcript.bytes_by_tag() == fed_a.transcript.bytes_by_tag()


def test_resume_refuses_a_checkpoint_of_another_configuration(tmp_path):
    run, _ = _runner(tmp_path, "plaintext", rounds=2)
    run.run()
    other, _ = _runner(tmp_path, "plaintext", rounds=2, resume=True)
    other.fingerprint = "different"
    with pytest.raises(CheckpointError, match="different configuration"):
        other.run()


def test_resume_without_checkpoint_names_the_missing_file(tmp_path):
    run, _ = _runner(tmp_path / "empty", "plaintext", resume=True)
    with pytest.raises(CheckpointError, match="no checkpoint to resume from"):
        run.run()

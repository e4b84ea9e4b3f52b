from typing import Any

import pytest
import torch

from securefg.data.synthetic import make_csbm
from securefg.errors import CheckpointError, ConfigError
from securefg.federation.federation import Federation
from securefg.federation.party import Party
from securefg.federation.program.context import ServerContext
from securefg.federation.runner import RoundRunner, stop_round
from securefg.methods.base import Method, MethodConfig, method_class
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
        def server_round(self, srv, r):
            if r == interrupt_at:
                raise Interrupted
            return super().server_round(srv, r)

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


class _Scripted(Method):
    """A method whose server learns a scripted validation score each round (NaN: none reported)."""

    name = "scripted"
    server_val_key = "server_val"

    def __init__(self, scores: list[float], key: str | None = "server_val") -> None:
        super().__init__(_task(), MethodConfig(rounds=len(scores)))
        self.scores, self.ran = scores, 0
        self.server_val_key = key  # type: ignore[misc]

    def setup_server(self, party: Party) -> None:
        pass

    def setup_client(self, party: Party, index: int) -> None:
        pass

    def server_round(self, srv: ServerContext, r: int) -> dict[str, float]:
        self.ran += 1
        srv.state["round"] = r
        return {"server_val": self.scores[r]}

    def measure_server(self, party: Party) -> dict[str, Any]:
        return {"round": party.state["round"]}

    def combine_measures(self, server: Any, per_client: Any) -> dict[str, Any]:
        r = server["round"]
        return {"mean_val": self.scores[r], "mean_test": r / 100}


def _scripted_run(scores: list[float], patience: int, tmp_path: Any = None) -> tuple[_Scripted, Any]:
    method = _Scripted(scores)
    fed = Federation(3, ProtocolStack.load("plaintext"), seed=0)
    every = 10 if tmp_path is not None else 0  # a checkpoint at the stop (none unless asked)
    out = RoundRunner(method, fed, rounds=len(scores), patience=patience, progress=False, out_dir=tmp_path,
                      checkpoint_every=every).run()
    return method, out


@pytest.mark.parametrize("scores,patience,stop", [
    ([0.1, 0.5, 0.4], 2, False),
    ([0.1, 0.5, 0.4, 0.5], 2, True),  # a tie is no improvement
    ([0.1, 0.5, 0.4, 0.5, 0.3], 3, True),
    ([0.1, 0.5, 0.4, 0.5], 0, False),
    ([float("nan"), float("nan")], 2, True),
    ([], 1, False),
])
def test_stop_round_counts_rounds_since_the_first_best(scores: list[float], patience: int, stop: bool) -> None:
    assert stop_round(scores, patience) is stop


def test_patience_stops_and_the_summary_keeps_the_best_validation_round(tmp_path: Any) -> None:
    scores = [0.1, 0.5, 0.4, 0.5, 0.3, 0.2, 0.9, 0.95]
    method, out = _scripted_run(scores, 3, tmp_path)
    assert method.ran == 5 and [h["round"] for h in out.history] == [0, 1, 2, 3, 4]
    assert out.stopped_early == {"round": 4, "patience": 3, "monitor": "server/server_val", "rounds_run": 5}
    assert out.summary["best_round"] == 1 and out.summary["final_round"] == 4
    # the checkpoint written at the stop resumes to the same stop without running a round
    fed = Federation(3, ProtocolStack.load("plaintext"), seed=0)
    again = _Scripted(scores)
    resumed = RoundRunner(again, fed, rounds=len(scores), patience=3, progress=False, out_dir=tmp_path,
                          resume=True).run()
    assert again.ran == 0 and resumed.stopped_early == out.stopped_early


def test_patience_zero_runs_every_round() -> None:
    scores = [0.1, 0.5, 0.4, 0.5, 0.3, 0.2, 0.9, 0.95]
    method, out = _scripted_run(scores, 0)
    assert method.ran == len(scores) and out.stopped_early is None and out.summary["best_round"] == 7


@pytest.mark.parametrize("patience", [-1, 1.5, True])
def test_bad_patience_is_a_config_error(patience: Any) -> None:
    with pytest.raises(ConfigError, match="patience"):
        _scripted_run([0.1, 0.2], patience)


def test_patience_needs_a_server_side_validation_score() -> None:
    method = _Scripted([0.1, 0.2], key=None)
    with pytest.raises(ConfigError, match="no validation score to the server"):
        RoundRunner(method, Federation(3, ProtocolStack.load("plaintext"), seed=0), rounds=2, patience=1)
    RoundRunner(method, Federation(3, ProtocolStack.load("plaintext"), seed=0), rounds=2, patience=0)


def test_redirected_stderr_gets_plain_progress_lines(capsys, monkeypatch):
    from securefg.federation import runner as runner_module

    monkeypatch.setattr(runner_module._progress, "LINE_EVERY_S", 0.0)
    method = _Scripted([0.1, 0.5, 0.4])
    fed = Federation(3, ProtocolStack.load("plaintext"), seed=0)
    RoundRunner(method, fed, rounds=3, progress=True).run()
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "round" in ln]
    assert [ln.split(" (")[0] for ln in lines] == [
        "scripted: round 1/3 val=0.1000", "scripted: round 2/3 val=0.5000", "scripted: round 3/3 val=0.4000"]
    assert all(ln.endswith(" s/round)") for ln in lines)


def test_no_checkpoint_is_written_unless_asked(tmp_path):
    """``checkpoint_every=0`` (the CLI's default) leaves only what the run reports: no 25 MB checkpoint."""
    method = method_class("fedavg")(_task(), MethodConfig(rounds=2, seed=5, hidden=8))
    fed = Federation(3, ProtocolStack.load("plaintext"), seed=5)
    RoundRunner(method, fed, rounds=2, out_dir=tmp_path, checkpoint_every=0, fingerprint="cfg", progress=False).run()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(CheckpointError, match="no checkpoint to resume from"):
        method2 = method_class("fedavg")(_task(), MethodConfig(rounds=2, seed=5, hidden=8))
        RoundRunner(method2, Federation(3, ProtocolStack.load("plaintext"), seed=5), rounds=2, out_dir=tmp_path,
                    resume=True, fingerprint="cfg", progress=False).run()

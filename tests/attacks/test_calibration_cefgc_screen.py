"""CeFGC receivers screening relayed generators: a spoofed generator is dropped, honest ones kept.

The task and fast settings are ``test_calibration_cefgc``'s (two structural families of small
graphs); the spoofing client relabels its class-c generator as class c+1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from securefg.methods.tasks import GraphTask
from tests.attacks.conftest import play, run_method, threat
from tests.attacks.test_calibration_cefgc import FAST, _graph_task

HONEST = ("client/1", "client/2")


def _play(task: GraphTask, options: dict[str, Any]) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    runs: list[dict[str, Any]] = []

    def rerun(method: str | None = None, protocol: str | None = None) -> dict[str, Any]:
        runs.append(run_method(task, method or "cefgc", protocol or "plaintext", rounds=1, lr=1e-3,
                               weight_decay=5e-4, options=options, keep=False))
        return runs[-1]

    base = run_method(task, "cefgc", "plaintext", rounds=1, lr=1e-3, weight_decay=5e-4, options=options)
    tm = threat(["client/0"], {"spoofed_generator": {"shift": 1}}, behaviour="malicious")
    return play(tm, base, task, rerun=rerun)["spoofed_generator"], base, runs


def test_screening_drops_the_spoofed_generators_and_keeps_the_honest_ones(tmp_path: Path) -> None:
    task = _graph_task()
    opts = {**FAST, "generator_cache": str(tmp_path / "generators")}
    undefended, _, _ = _play(task, opts)
    screened, base, runs = _play(task, {**opts, "screen_generators": True})
    assert undefended.status == "ran" and screened.status == "ran", (undefended.reason, screened.reason)
    assert screened.outcome.value <= 0.05, screened.outcome.details
    assert screened.outcome.value < undefended.outcome.value or undefended.outcome.value <= 0.05
    spoofed_fed = runs[-1]["_federation"]
    for cid in HONEST:
        clean = base["_federation"].parties[cid].state["screen"]
        assert clean and all(v.kept for v in clean)  # honest generators all pass
        verdicts = spoofed_fed.parties[cid].state["screen"]
        dropped = [v for v in verdicts if not v.kept]
        assert len(dropped) == 2  # client 0's two relabelled class units
        assert all(v.declared_distance > v.nearest_distance for v in dropped)

"""The round runner: drives a method round by round with progress, timing and checkpoints.

A checkpoint (``<out>/checkpoint.pt`` plus ``<out>/transcript.jsonl``) is written every
``checkpoint_every`` rounds and at the end, and only then: ``checkpoint_every=0`` (the default)
writes none, since a checkpoint holds every party's state (25 MB for FedAvg on Cora) and nobody
asked for it. ``resume=True`` continues from it, so an interrupted run loses at most the rounds
since the last checkpoint. The checkpoint is our
own local file, read with ``torch.load(weights_only=True)`` (no arbitrary objects).

**Early stopping** (``patience > 0``): the server stops after ``patience`` rounds in which the
validation score *it* learned (the key the method names in ``Method.server_val_key``, e.g.
FedStruct's securely summed validation counts) did not exceed its best so far. The decision uses
only what the server already holds, so stopping reveals nothing new; the experimenter's
per-client ``measure`` never steers the protocol.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from securefg.errors import CheckpointError, ConfigError
from securefg.federation.federation import Federation
from securefg.federation.program.driver import stop_round
from securefg.federation.program.session import InProcessRun

__all__ = ["CHECKPOINT", "TRANSCRIPT", "RoundRunner", "RunOutcome", "config_fingerprint", "stop_round"]
from securefg.federation.transcript import load_jsonl
from securefg.methods.base import Method

CHECKPOINT = "checkpoint.pt"
TRANSCRIPT = "transcript.jsonl"


@dataclass
class RunOutcome:
    """History of per-round measurements and the method's summary."""

    history: list[dict[str, Any]]
    summary: dict[str, Any]
    train_seconds: float
    resumed_from: int | None = None
    #: Seconds the earlier processes of a resumed run spent up to the checkpoint it resumed (0 otherwise).
    earlier_seconds: float = 0.0
    server_view: list[dict[str, float]] = field(default_factory=list)
    stopped_early: dict[str, Any] | None = None


def config_fingerprint(config: dict[str, Any]) -> str:
    """Short hash of a run configuration: a checkpoint only resumes the run that wrote it."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


class RoundRunner:
    """Run ``method`` on ``fed`` for ``rounds`` rounds.

    Args:
        method (Method): The method (already constructed).
        fed (Federation): The parties and network.
        rounds (int): Number of rounds.
        out_dir (Path, optional): Where checkpoints go. (default: none, no checkpoints)
        checkpoint_every (int): Rounds between checkpoints (one also at the end); 0 = no
            checkpoint at all. (default: ``0``)
        resume (bool): Continue from ``out_dir``'s checkpoint. (default: :obj:`False`)
        fingerprint (str): Configuration hash stored in (and checked against) checkpoints.
        progress (bool): Show a progress bar on stderr. (default: :obj:`True`)
        patience (int): Stop after this many rounds without a better server-side validation
            score; 0 runs every round. (default: ``0``)
        on_round (Callable[[int, dict], None], optional): Called with the round and its history
            row after each round is measured (``securefg tune`` reports validation scores to its
            pruner from here); it only observes, so a run with and without it is the same. An
            exception it raises stops the run. (default: :obj:`None`)

    Raises:
        ConfigError: ``patience`` is negative, or positive for a method that names no
            server-side validation score (``Method.server_val_key``).
    """

    def __init__(
        self,
        method: Method,
        fed: Federation,
        *,
        rounds: int,
        out_dir: Path | None = None,
        checkpoint_every: int = 0,
        resume: bool = False,
        fingerprint: str = "",
        progress: bool = True,
        patience: int = 0,
        on_round: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> None:
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ConfigError(f"patience must be an integer >= 0 (0 = run every round), got {patience!r}")
        if patience and method.server_val_key is None:
            raise ConfigError(
                f"method {method.name!r} reports no validation score to the server, so it cannot stop "
                "early; use patience = 0 (--option patience=0)"
            )
        self.method, self.fed, self.rounds = method, fed, rounds
        self.out_dir, self.checkpoint_every, self.resume = out_dir, checkpoint_every, resume
        self.fingerprint, self.progress, self.patience = fingerprint, progress, patience
        self.observer = on_round

    def run(self) -> RunOutcome:
        """Every round of the method's party programs on the in-process backend."""
        fed, method = self.fed, self.method
        session = InProcessRun(method, fed, rounds=self.rounds, patience=self.patience)
        self._rngs = session.rngs
        self.program_parties = session.parties  # runtimes (who dropped where), for tests and audits
        start_round, history, server_view, resumed = 0, [], [], None
        self._t0, self._earlier = time.perf_counter(), 0.0
        if self.resume:
            start_round, history, server_view = self._load()
            resumed = start_round
        server = session.server
        with _progress(self.progress, self.rounds, start_round, method.name) as bar:
            def on_round(r: int, view: list[dict[str, Any]]) -> None:
                history.append(session.row(r))
                bar(r, history[-1])
                if self.observer is not None:
                    self.observer(r, history[-1])
                last = server._ran_out(view) or r == self.rounds - 1
                if self.out_dir is not None and self.checkpoint_every and (last or (r + 1) % self.checkpoint_every == 0):
                    self._save(r + 1, history, view)

            server.on_round = on_round
            outcome = server.run(start=start_round, server_view=server_view)
        return RunOutcome(history, method.summarize(history), outcome.train_seconds, resumed, self._earlier,
                          outcome.server_view, outcome.stopped_early)

    # ---------------------------------------------------------------- checkpoints
    def _save(self, next_round: int, history: list[dict[str, Any]], server_view: list[dict[str, float]]) -> None:
        assert self.out_dir is not None
        self.out_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "fingerprint": self.fingerprint,
            "next_round": next_round,
            # so a resumed run's time counts every process that ran its rounds
            "elapsed_seconds": self._earlier + time.perf_counter() - self._t0,
            "history": json.dumps(history, default=float),
            "server_view": json.dumps(server_view),
            "parties": self.method.checkpoint(self.fed),
            "generator": self.method.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "party_rngs": {pid: g.get_state() for pid, g in self._rngs.items()},
        }
        tmp = self.out_dir / (CHECKPOINT + ".tmp")
        torch.save(state, tmp)
        tmp.replace(self.out_dir / CHECKPOINT)
        self.fed.transcript.save_jsonl(self.out_dir / TRANSCRIPT)

    def _load(self) -> tuple[int, list[dict[str, Any]], list[dict[str, float]]]:
        if self.out_dir is None or not (self.out_dir / CHECKPOINT).is_file():
            raise CheckpointError(f"no checkpoint to resume from in {self.out_dir} (expected {CHECKPOINT})")
        try:
            state = torch.load(self.out_dir / CHECKPOINT, weights_only=True)
        except Exception as exc:  # corrupt file: say so, keep it for inspection
            raise CheckpointError(f"checkpoint {self.out_dir / CHECKPOINT} is unreadable: {exc}") from exc
        if state.get("fingerprint") != self.fingerprint:
            raise CheckpointError(
                f"checkpoint in {self.out_dir} was written by a different configuration "
                f"({state.get('fingerprint')} != {self.fingerprint}); use another --out or drop --resume"
            )
        self.method.restore(self.fed, state["parties"])
        self._earlier = float(state.get("elapsed_seconds", 0.0))
        self.method.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        for pid, g in self._rngs.items():
            if pid in state.get("party_rngs", {}):
                g.set_state(state["party_rngs"][pid])
        if (self.out_dir / TRANSCRIPT).is_file():
            # The saved transcript already holds the original run's setup messages (e.g.
            # FedStruct's offline phase); the setup just re-run must not count them twice.
            self.fed.transcript.clear()
            load_jsonl(self.out_dir / TRANSCRIPT, self.fed.transcript)
        return int(state["next_round"]), json.loads(state["history"]), json.loads(state["server_view"])


class _progress:
    """A rich progress bar (or nothing) that shows the latest mean validation score."""

    #: Seconds between plain progress lines when stderr is not a terminal.
    LINE_EVERY_S = 30.0

    def __init__(self, enabled: bool, total: int, start: int, name: str) -> None:
        self.enabled, self.total, self.start, self.name = enabled, total, start, name

    def __enter__(self) -> Any:
        if not self.enabled:
            return lambda r, m: None
        if not sys.stderr.isatty():
            return self._lines()
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), TextColumn("{task.fields[info]}"), transient=True)
        self._p.start()
        self._t = self._p.add_task(self.name, total=self.total, completed=self.start, info="")

        def update(r: int, m: dict[str, Any]) -> None:
            v = m.get("mean_val")
            self._p.update(self._t, completed=r + 1, info=f"val={v:.4f}" if isinstance(v, float) else "")

        return update

    def _lines(self) -> Any:
        """Redirected stderr (nohup, CI, a log file): rich draws nothing there, so write a plain
        line at most every ``LINE_EVERY_S`` seconds and at the last round."""
        t0 = last = time.monotonic()
        done = self.start

        def update(r: int, m: dict[str, Any]) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last < self.LINE_EVERY_S and r + 1 < self.total:
                return
            last = now
            v = m.get("mean_val")
            per_round = (now - t0) / max(r + 1 - done, 1)
            val = f" val={v:.4f}" if isinstance(v, float) else ""
            print(f"{self.name}: round {r + 1}/{self.total}{val} ({per_round:.1f} s/round)", file=sys.stderr,
                  flush=True)

        return update

    def __exit__(self, *exc: object) -> None:
        if self.enabled and hasattr(self, "_p"):
            self._p.stop()

"""Where an in-process round's time goes, per step and per party: the deployment's critical path.

In process, every party runs on one core one after another, so a round's wall time is the *sum*
of every client's work. A deployment runs the clients of one step side by side: its round takes
the server's own work plus, per step, the *slowest* client's. :class:`StepClock` records both
from one in-process run (set it on :attr:`InProcessServerRuntime.clock
<securefg.federation.program.inprocess.InProcessServerRuntime.clock>`): each client's seconds
inside a step's handler, and the server's seconds between steps, charged to the stage of the
step whose replies it was processing (the round's first stretch, before any step, to
``"(round start)"``). Network time is not modelled.

A step is named by its stage, or by its action when it has none (``"ckks/upload"``,
``"secure_sum/masked_input"``, ``"fedpub/train"``), prefixed by its tag when it has one.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

ROUND_START = "(round start)"


@dataclass
class StageTimes:
    """One stage's seconds, summed over its steps.

    Args:
        steps (int): How many steps ran at this stage.
        clients_total (float): Every client's handler seconds, added (the in-process cost).
        clients_slowest (float): Per step the slowest client's seconds, added (a deployment's).
        server (float): The server's own seconds after these steps' replies came.
    """

    steps: int = 0
    clients_total: float = 0.0
    clients_slowest: float = 0.0
    server: float = 0.0


@dataclass
class StepClock:
    """Per-stage client and server seconds of the rounds it was started for."""

    stages: dict[str, StageTimes] = field(default_factory=lambda: defaultdict(StageTimes))
    _mark: float | None = None
    _stage: str = ROUND_START

    def start(self) -> None:
        """Begin timing (call before a round); the server's first stretch goes to ``(round start)``."""
        self._mark, self._stage = time.perf_counter(), ROUND_START

    def stop(self) -> None:
        """End timing (call after a round): the server's last stretch goes to the last step's stage."""
        self._charge_server()
        self._mark = None

    def step_started(self, name: str) -> None:
        """The server hands out a step named ``name``: its own time so far goes to the previous stage."""
        self._charge_server()
        self.stages[name].steps += 1

    def step_answered(self, name: str, seconds: dict[str, float]) -> None:
        """Every party's handler seconds for the step named ``name``; the server's clock restarts."""
        st = self.stages[name]
        st.clients_total += sum(seconds.values())
        st.clients_slowest += max(seconds.values(), default=0.0)
        self._stage = name
        if self._mark is not None:
            self._mark = time.perf_counter()

    def _charge_server(self) -> None:
        if self._mark is None:
            return
        now = time.perf_counter()
        self.stages[self._stage].server += now - self._mark
        self._mark = now

    @property
    def in_process(self) -> float:
        """Seconds in one process: every client's work plus the server's."""
        return sum(s.clients_total + s.server for s in self.stages.values())

    @property
    def critical_path(self) -> float:
        """Seconds with the clients of a step side by side: per step the slowest, plus the server."""
        return sum(s.clients_slowest + s.server for s in self.stages.values())

    def reset(self) -> None:
        """Forget every stage (keeps running if started)."""
        self.stages = defaultdict(StageTimes)


def step_name(*, action: str, tag: str, stage: str) -> str:
    """The name a step's time is filed under: ``"<tag> <stage or action>"``."""
    what = stage or action
    return f"{tag} {what}" if tag else what

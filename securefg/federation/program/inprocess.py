"""The in-process backend: every party in this process, each step a direct call.

Each party still has its own channel keys and transport end (:class:`PartyTransport`); only
the carrying is local: a step hands the request's wires to the party's
:class:`~securefg.federation.program.client_runtime.ClientRuntime` and takes its reply, one
party after another in a fixed order, so a seed gives one run. Every party's sends go to one
shared :class:`~securefg.federation.transcript.Transcript`, in the order they happen.

Dropouts are simulated: a party in :attr:`InProcessServerRuntime.offline` never answers, and
one listed in :attr:`~InProcessServerRuntime.drop_at` under a step's stage (or action, when the
step has no stage) stops answering from that step on, as a process that died would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from securefg.federation.channel import ChannelIdentity
from securefg.federation.party import SERVER, Party
from securefg.federation.party_transport import PartyTransport
from securefg.federation.program.client_runtime import ClientRuntime
from securefg.federation.program.server_runtime import ServerRuntime, StepError
from securefg.federation.program.step import Step
from securefg.federation.program.step_clock import StepClock, step_name
from securefg.federation.transcript import Transcript


@dataclass
class InProcessServerRuntime(ServerRuntime):
    """The server's runtime when every party lives in this process.

    Args:
        nodes (dict[str, ClientRuntime]): Every other party's runtime, by id.
        offline (set[str]): Parties that never answer. (default: none)
        drop_at (dict[str, set[str]]): Stage (or action) -> parties that stop answering there.
            (default: none)
        clock (StepClock, optional): Records each party's seconds per step (benches' critical
            path). (default: none)
    """

    nodes: dict[str, ClientRuntime] = field(default_factory=dict)
    offline: set[str] = field(default_factory=set)
    drop_at: dict[str, set[str]] = field(default_factory=dict)
    clock: StepClock | None = None

    def exchange_steps(self, requests: Mapping[str, Step]) -> dict[str, Step | StepError]:
        if self.clock is None:
            return self._answer_all(requests, None)
        first = next(iter(requests.values()))
        name = step_name(action=first.action, tag=first.tag, stage=first.stage)
        self.clock.step_started(name)
        seconds: dict[str, float] = {}
        out = self._answer_all(requests, seconds)
        self.clock.step_answered(name, seconds)
        return out

    def _answer_all(self, requests: Mapping[str, Step], seconds: dict[str, float] | None) -> dict[str, Step | StepError]:
        out: dict[str, Step | StepError] = {}
        for pid in sorted(requests):  # a fixed order: one seed, one run
            req = requests[pid]
            if pid in self.offline:
                out[pid] = StepError("offline")
                continue
            if pid in self.drop_at.get(req.stage or req.action, ()):
                self.offline.add(pid)
                out[pid] = StepError(f"dropped out at {req.stage or req.action}")
                continue
            t0 = time.perf_counter()
            out[pid] = self.nodes[pid].answer(req)
            if seconds is not None:
                seconds[pid] = time.perf_counter() - t0
        return out


@dataclass
class InProcessParties:
    """Every party of one in-process run: runtimes, transports, states and one transcript."""

    server: InProcessServerRuntime
    clients: dict[str, ClientRuntime]
    transcript: Transcript

    @property
    def parties(self) -> dict[str, Party]:
        """Every party's state by id (the experimenter's view, for measuring and audits)."""
        return {SERVER: self.server.party, **{pid: rt.party for pid, rt in self.clients.items()}}


def in_process_parties(pids: Iterable[str], *, transcript: Transcript | None = None,
                       session: bytes | None = None, states: Mapping[str, Party] | None = None) -> InProcessParties:
    """Key pairs, transports and runtimes for ``pids`` (the server first, then the others).

    Args:
        pids (Iterable[str]): Every party id of the run; must include ``"server"``.
        transcript (Transcript, optional): Where every party's sends are recorded. (default: a new one)
        session (bytes, optional): The run's session id. (default: random)
        states (Mapping[str, Party], optional): Existing party states to run on. (default: new ones)
    """
    ids = list(dict.fromkeys(pids))
    if SERVER not in ids:
        raise ValueError("an in-process federation needs a 'server' party")
    transcript = transcript if transcript is not None else Transcript()
    session = session or os.urandom(16)
    identities = {pid: ChannelIdentity(pid) for pid in ids}
    directory = {pid: ident.public_bytes for pid, ident in identities.items()}
    states = dict(states or {})

    def transport(pid: str) -> PartyTransport:
        return PartyTransport(identities[pid], session=session, directory=directory, transcript=transcript)

    clients = {pid: ClientRuntime(transport(pid), states.get(pid) or Party(pid)) for pid in ids if pid != SERVER}
    server = InProcessServerRuntime(transport(SERVER), states.get(SERVER) or Party(SERVER),
                                    peers=[p for p in ids if p != SERVER], nodes=clients)
    return InProcessParties(server, clients, transcript)

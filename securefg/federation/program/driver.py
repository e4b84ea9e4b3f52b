"""The round loop of a party-program method, once, for every backend.

:class:`ServerProgram` is the server party's whole life: its setup, then per round the
method's ``server_round`` and a ``program/measure`` step in which every live party records the
experimenter's measurement of its own state (written to that party's own sink: memory in
process, a file of its own on Flower; never sent to another party), then early stopping on
what the server learned. :func:`serve_party` registers a client's (or a helper's) handlers:
the method's client actions, the exchange halves and the measurement.

A backend only supplies the runtimes (how steps travel) and the sinks (where measurements go).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from securefg.federation.party import SERVER, client_index, is_client
from securefg.federation.program.client_runtime import ClientRuntime
from securefg.federation.program.context import ClientContext, ServerContext
from securefg.federation.program.exchange import ClientExchange, ServerExchange
from securefg.federation.program.server_runtime import ServerRuntime
from securefg.federation.program.step import Step
from securefg.protocol.stack import ProtocolStack

if TYPE_CHECKING:
    from securefg.methods.base import Method

ACTION_MEASURE = "program/measure"
ACTION_CHECKPOINT = "program/checkpoint"

#: Where a party's per-round measurement goes: ``sink(pid, round, values)``.
Sink = Callable[[str, int, dict[str, Any]], None]


def stop_round(scores: list[float], patience: int) -> bool:
    """Whether ``patience`` rounds have passed since the best of ``scores`` (the first maximum).

    NaN scores (no validation nodes reported) never improve the best.
    """
    if patience < 1 or not scores:
        return False
    best_at, best = -1, float("-inf")
    for i, s in enumerate(scores):
        if not math.isnan(s) and s > best:
            best_at, best = i, s
    return len(scores) - 1 - best_at >= patience


def party_stack(stack: ProtocolStack) -> ProtocolStack:
    """A party's own copy of the run's stack: mechanisms and transforms keep per-party state
    (a DP transform's pending call, a mechanism's last report), as each process's would."""
    import copy

    return copy.deepcopy(stack)


@dataclass
class ProgramOutcome:
    """What the server's program leaves: its per-round view and how the loop ended."""

    server_view: list[dict[str, Any]] = field(default_factory=list)
    train_seconds: float = 0.0
    stopped_early: dict[str, Any] | None = None


class ServerProgram:
    """The server party's program for ``method``.

    Args:
        method (Method): The run's method (the server uses only its server half).
        rt (ServerRuntime): The server's runtime on its backend.
        stack (ProtocolStack): The server's copy of the stack.
        seed (int): The run seed.
        rounds (int): Rounds to run.
        sink (Sink): Where the server's own measurement goes.
        patience (int): Rounds without a better server-side validation score before stopping
            (0: run every round). (default: ``0``)
        on_round (Callable[[int], None], optional): Called after each round's measurement (the
            in-process runner's progress bar and checkpoints). (default: none)
    """

    def __init__(self, method: Method, rt: ServerRuntime, stack: ProtocolStack, *, seed: int, rounds: int,
                 sink: Sink, patience: int = 0, on_round: Callable[[int, list[dict[str, Any]]], Any] | None = None,
                 checkpoint_every: int = 0, save: Callable[[int, list[dict[str, Any]]], None] | None = None) -> None:
        from securefg.methods.training import party_seed

        self.method, self.rt, self.rounds, self.sink = method, rt, rounds, sink
        self.patience, self.on_round = patience, on_round
        self.checkpoint_every, self.save = checkpoint_every, save
        self.exchange = ServerExchange(rt, stack, seed=party_seed(seed, SERVER, -1), run_seed=seed)
        self.context = ServerContext(self.exchange)

    def setup(self) -> None:
        self.method.check_stack(self.exchange.stack)
        self.method.setup_server(self.rt.party)

    def prepare(self) -> None:
        """The method's communicating setup phase, once before round 0 (round -1)."""
        self.exchange.round = -1
        self.method.server_prepare(self.context)

    def play_round(self, r: int) -> dict[str, Any]:
        """Round ``r`` as the server, then every party's measurement of it; returns what the
        server learned (its view of the round)."""
        self.exchange.round = r
        learned = {"round": r, **self.method.server_round(self.context, r)}
        self.exchange.step(self.rt.parties, action=ACTION_MEASURE)
        self.sink(SERVER, r, self.method.measure_server(self.rt.party))
        return learned

    def run(self, *, start: int = 0, server_view: list[dict[str, Any]] | None = None) -> ProgramOutcome:
        """Rounds ``start`` .. ``rounds - 1`` (``server_view``: what earlier rounds learned)."""
        out = ProgramOutcome(list(server_view or []))
        t0 = time.perf_counter()
        if start == 0:
            self.prepare()
        key = self.method.server_val_key
        for r in range(start, self.rounds):
            if self._ran_out(out.server_view):
                break
            out.server_view.append(self.play_round(r))
            stop = self._ran_out(out.server_view)
            if self.on_round is not None:
                self.on_round(r, out.server_view)
            last = stop or r == self.rounds - 1
            if self.save is not None and (last or (self.checkpoint_every and (r + 1) % self.checkpoint_every == 0)):
                # every party saves its own state (a file of its own); then the server its own
                self.exchange.step(self.rt.parties, action=ACTION_CHECKPOINT, info={"next_round": r + 1})
                self.save(r + 1, out.server_view)
            if stop:
                break
        out.train_seconds = time.perf_counter() - t0
        if self._ran_out(out.server_view):
            out.stopped_early = {"round": out.server_view[-1]["round"], "patience": self.patience,
                                 "monitor": f"server/{key}", "rounds_run": len(out.server_view)}
        return out

    def _ran_out(self, view: list[dict[str, Any]]) -> bool:
        if not self.patience or len(view) >= self.rounds:
            return False
        key = self.method.server_val_key
        return stop_round([float(v.get(key, float("nan"))) for v in view], self.patience)


def serve_party(method: Method, rt: ClientRuntime, stack: ProtocolStack, *, seed: int, clients: Sequence[str],
                helpers: Sequence[str], sink: Sink, save: Callable[[int], None] | None = None) -> ClientExchange:
    """Set up a client (or helper) party and register its handlers; returns its exchange half.
    ``save(next_round)`` writes the party's own checkpoint when the server asks for one
    (``program/checkpoint``)."""
    from securefg.methods.training import party_seed

    pid = rt.party.pid
    if is_client(pid):
        method.setup_client(rt.party, client_index(pid))
    else:
        method.setup_helper(rt.party)
    ex = ClientExchange(rt, stack, seed=party_seed(seed, pid, -1), clients=clients, helpers=helpers)
    actions = method.client_actions() if is_client(pid) else method.helper_actions()
    for action, handler in actions.items():
        rt.on(action, _bind(ex, handler))

    def measure(step: Step) -> None:
        if is_client(pid):
            sink(pid, step.round, method.measure_client(rt.party))

    rt.on(ACTION_MEASURE, measure)
    if save is not None:
        rt.on(ACTION_CHECKPOINT, lambda step: save(int(step.info["next_round"])))
    else:
        rt.on(ACTION_CHECKPOINT, lambda step: None)
    return ex


def party_checkpoint(method: Method, party: Any, ex_rng: Any, *, next_round: int, fingerprint: str,
                     **extra: Any) -> dict[str, Any]:
    """One party's own checkpoint: its restorable state, its randomness and where it stands."""
    import torch

    return {"fingerprint": fingerprint, "next_round": next_round, "state": method.checkpoint_party(party),
            "exchange_rng": ex_rng.get_state(), "torch_rng": torch.get_rng_state(), **extra}


def restore_party_checkpoint(method: Method, party: Any, ex_rng: Any, saved: Mapping[str, Any], *,
                             fingerprint: str, where: str) -> int:
    """Load :func:`party_checkpoint` into ``party``; returns the round to go on from.

    Raises:
        CheckpointError: The checkpoint belongs to another configuration.
    """
    import torch

    from securefg.errors import CheckpointError

    if saved.get("fingerprint") != fingerprint:
        raise CheckpointError(f"checkpoint {where} was written by a different configuration "
                              f"({saved.get('fingerprint')} != {fingerprint}); use another --out or drop --resume")
    method.restore_party(party, saved["state"])
    ex_rng.set_state(saved["exchange_rng"])
    torch.set_rng_state(saved["torch_rng"])
    return int(saved["next_round"])


def _bind(ex: ClientExchange, handler: Callable[[ClientContext], Mapping[str, Any] | None]) -> Callable[[Step], Any]:
    return lambda step: handler(ClientContext(ex, step))


class MeasurementLog:
    """Every party's measurements by round: the experimenter's side of the sinks.

    ``history`` combines them round by round as the method says; a client that dropped keeps
    its last measurement, as a party's state would in one process.
    """

    def __init__(self) -> None:
        self.by_round: dict[int, dict[str, dict[str, Any]]] = {}

    def record(self, pid: str, round: int, values: dict[str, Any]) -> None:
        self.by_round.setdefault(round, {})[pid] = values

    def row(self, method: Method, round: int, clients: Sequence[str]) -> dict[str, Any]:
        """The history row of ``round`` (the method's combination of the parties' measurements)."""
        last: dict[str, dict[str, Any]] = {}
        server: dict[str, Any] = {}
        for r in sorted(k for k in self.by_round if k <= round):
            for pid, values in self.by_round[r].items():
                if pid == SERVER:
                    server = values if r == round else server
                else:
                    last[pid] = values
        per_client = {cid: last.get(cid, {}) for cid in clients}
        return {"round": round, **method.combine_measures(server, per_client)}

    def history(self, method: Method, clients: Sequence[str], rounds: Sequence[int]) -> list[dict[str, Any]]:
        return [self.row(method, r, clients) for r in rounds]

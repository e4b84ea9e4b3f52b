"""One run's parties, all in this process, driven round by round.

The round runner (:class:`~securefg.federation.runner.RoundRunner`) drives a whole run with
progress, checkpoints and early stopping; benches and tests that step two runs side by side
drive an :class:`InProcessRun` themselves. Both are the same party programs on the in-process
backend: the parties' states live in ``fed.parties`` (the experimenter reads them, for audits and
checkpoints) and every party's sends go to ``fed.transcript``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from securefg.federation.party import SERVER, is_client
from securefg.federation.program.driver import MeasurementLog, ServerProgram, party_stack, serve_party
from securefg.federation.program.inprocess import InProcessParties, in_process_parties

if TYPE_CHECKING:
    from torch import Generator

    from securefg.federation.federation import Federation
    from securefg.methods.base import Method


class InProcessRun:
    """``method``'s party programs over ``fed``'s parties, in this process.

    Dropouts configured on ``fed`` (``fed.transport.offline``, ``fed.exchange.dropouts`` by
    stage or action) become the in-process backend's simulated dropouts.

    Args:
        method (Method): The run's method.
        fed (Federation): Its parties, stack and transcript.
        rounds (int): Rounds of the run (the server program's bound).
        patience (int): Early-stopping patience. (default: ``0``)
    """

    def __init__(self, method: Method, fed: Federation, *, rounds: int, patience: int = 0) -> None:
        self.method, self.fed = method, fed
        self.parties: InProcessParties = in_process_parties(list(fed.parties), transcript=fed.transcript,
                                                            session=fed.transport.session, states=fed.parties)
        self.parties.server.offline = set(fed.transport.offline)
        self.parties.server.drop_at = {stage: set(pids) for stage, pids in fed.exchange.dropouts.items()}
        self.log = MeasurementLog()
        self.clients = fed.client_ids
        helpers = [p for p in fed.parties if p != SERVER and not is_client(p)]
        seed = method.config.seed
        self.server = ServerProgram(method, self.parties.server, party_stack(fed.stack), seed=seed, rounds=rounds,
                                    sink=self.log.record, patience=patience)
        self.server.setup()
        self.rngs: dict[str, Generator] = {SERVER: self.server.exchange.rng}
        for pid, rt in self.parties.clients.items():
            ex = serve_party(method, rt, party_stack(fed.stack), seed=seed, clients=self.clients, helpers=helpers,
                             sink=self.log.record)
            self.rngs[pid] = ex.rng
        method.observe_run(fed)

    def prepare(self) -> None:
        """The method's communicating setup phase (before round 0)."""
        self.server.prepare()

    def play_round(self, r: int) -> dict[str, Any]:
        """Round ``r`` and its measurements; returns what the server learned."""
        return self.server.play_round(r)

    def row(self, r: int) -> dict[str, Any]:
        """The experimenter's history row of round ``r``."""
        return self.log.row(self.method, r, self.clients)

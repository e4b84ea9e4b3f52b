"""A method's party programs on the Flower backend, and the registry that finds them.

In process, a method's ``run_round`` plays every party in turn. On Flower each party is its own
OS process, so a method runs there once it is split into a server program (what
``run_round`` does as the server, driving Flower steps) and a node program (the handlers of the
client actions, calling the method's own ``handle_*`` code), plus what the experimenter (the
launcher) needs to measure the run as the in-process runner does. Mechanisms come from
:mod:`securefg.integrations.flower.exchange` and :mod:`~securefg.integrations.flower.ckks`;
helper parties such as the ``keyholder`` need no method code at all (their actions are the
mechanisms').
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from securefg.errors import ConfigError
from securefg.federation.federation import Federation
from securefg.federation.party import Party
from securefg.integrations.flower.exchange import ClientExchange
from securefg.integrations.flower.runtime import ClientRuntime, ServerRuntime
from securefg.methods.base import Method
from securefg.protocol.stack import ProtocolStack

#: Where a party writes one of its own outputs, by name (``out("scores.jsonl")``).
OutFile = Callable[[str], Path]


class PartyProgram(abc.ABC):
    """One method's server program, client program and measurement on the Flower backend."""

    @abc.abstractmethod
    def supports(self, method: Method) -> bool:
        """Whether ``method`` is this program's method."""

    @abc.abstractmethod
    def check(self, method: Method, stack: ProtocolStack) -> None:
        """Raise :class:`ConfigError` for what this program cannot run."""

    @abc.abstractmethod
    def setup_server(self, method: Method, stack: ProtocolStack, party: Party) -> None:
        """The server's state before the first round (as ``method.setup`` makes it)."""

    @abc.abstractmethod
    def run_server(self, rt: ServerRuntime, method: Method, stack: ProtocolStack, *, rounds: int,
                   out: OutFile) -> list[dict[str, Any]]:
        """Every round as the server; returns what the server learned per round."""

    @abc.abstractmethod
    def setup_client(self, method: Method, stack: ProtocolStack, party: Party) -> None:
        """A client's own state before the first round (its data only)."""

    @abc.abstractmethod
    def serve_client(self, rt: ClientRuntime, ex: ClientExchange, method: Method, *, out: OutFile) -> None:
        """Register the client's action handlers."""

    @abc.abstractmethod
    def measure(self, method: Method, fed: Federation, *, rounds: int, out: Callable[[str, str], Path]) -> list[dict[str, Any]]:
        """The experimenter's per-round history from what the parties wrote (``out(pid, name)``),
        on ``fed`` (its parties' states are the experimenter's stand-ins)."""

    def report(self, method: Method, fed: Federation, *, out: Callable[[str, str], Path]) -> dict[str, Any]:
        """Extra ``result.json`` keys. (default: ``method.report()``, if it has one)"""
        return dict(getattr(method, "report", dict)())


def program_for(method: Method) -> PartyProgram:
    """The Flower party programs of ``method``.

    Raises:
        ConfigError: The method has none yet.
    """
    from securefg.integrations.flower.cefgc import CeFGCProgram
    from securefg.integrations.flower.fedavg import FedAvgProgram

    for program in (CeFGCProgram(), FedAvgProgram()):
        if program.supports(method):
            return program
    raise ConfigError(f"method {method.name!r} has no Flower party programs yet "
                      "(supported: fedavg, fedprox, cefgc_plus, cefgc_star_plus); use --backend inprocess")

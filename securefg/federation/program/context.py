"""What a method's party programs see: the server's context and a client's context.

A method's :meth:`~securefg.methods.base.Method.server_round` gets a :class:`ServerContext`:
its own state (``party``), the live clients, and the exchange calls (``ask`` a client action,
``broadcast``, ``aggregate``, ``similarity``, ``relay``). A client action handler gets a
:class:`ClientContext`: its own state, the step that asked it, what was broadcast to it, and
``contribute`` for its inputs to the server's next exchanges. Neither can reach the other's
state: all that crosses is sealed envelopes and small public step fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from securefg.federation.party import Party
from securefg.federation.program.exchange import ClientExchange, ServerExchange
from securefg.federation.program.step import InfoValue, Step

Tensors = Mapping[str, torch.Tensor]


class ServerContext:
    """The server's side of one run, handed to ``Method.server_round``.

    Args:
        exchange (ServerExchange): The server's exchange half.
    """

    def __init__(self, exchange: ServerExchange) -> None:
        self.exchange = exchange
        self.rt = exchange.rt

    @property
    def party(self) -> Party:
        """The server's own state."""
        return self.rt.party

    @property
    def state(self) -> dict[str, Any]:
        return self.rt.party.state

    @property
    def round(self) -> int:
        return self.exchange.round

    @property
    def clients(self) -> list[str]:
        """Clients still live (connected and not dropped)."""
        return self.rt.live

    @property
    def dropped(self) -> dict[str, str]:
        """Parties that dropped out, and where."""
        return dict(self.rt.dropped)

    def ask(self, action: str, *, to: Iterable[str] | None = None,
            info: Mapping[str, InfoValue] | None = None) -> dict[str, dict[str, InfoValue]]:
        """Run the clients' handler of ``action`` (default: on every live client); returns each
        answering client's public reply info."""
        return self.exchange.ask(action, to=to, info=info)

    def broadcast(self, tag: str, tensors: Tensors, *, to: Iterable[str] | None = None) -> list[str]:
        """Seal ``tensors`` for the receivers; they arrive with each receiver's next step."""
        return self.exchange.broadcast(tag, tensors, to=to)

    def aggregate(self, tag: str, *, clients: Iterable[str] | None = None, mean: bool = True,
                  weighted: bool = False) -> dict[str, torch.Tensor]:
        """The (weighted mean) sum of what ``clients`` contributed to ``tag`` this round."""
        return self.exchange.aggregate(tag, clients=clients, mean=mean, weighted=weighted)

    def contributors(self, tag: str) -> tuple[str, ...]:
        """Who is in this round's sum of ``tag``."""
        return self.exchange.contributors[(tag, self.round)]

    def similarity(self, tag: str, *, clients: Iterable[str] | None = None,
                   metric: str = "cosine") -> tuple[list[str], torch.Tensor]:
        """The pairwise similarity of the vectors ``clients`` offered for ``tag``."""
        from securefg.federation.program import personalized

        return personalized.similarity(self.exchange, tag, clients=clients, metric=metric)

    def personalized_aggregate(self, tag: str, coefficients: Mapping[str, Mapping[str, float]], *,
                               clients: Iterable[str] | None = None) -> list[str]:
        """Client i gets Σ_j coefficients[i][j] x_j of what ``clients`` offered for ``tag``;
        returns the receivers (each reads its mix with ``ClientContext.personalized``)."""
        from securefg.federation.program import personalized

        return personalized.personalized_aggregate(self.exchange, tag, coefficients, clients=clients)

    def relay(self, tag: str, *, clients: Iterable[str] | None = None, exclude_self: bool = True,
              shuffle: bool = True) -> list[str]:
        """Forward the items ``clients`` offered for ``tag`` among them; returns the recipients."""
        from securefg.federation.program import relay

        return relay.relay(self.exchange, tag, clients=clients, exclude_self=exclude_self, shuffle=shuffle)

    def collect(self, tag: str, *, clients: Iterable[str] | None = None) -> dict[str, dict[str, torch.Tensor]]:
        """Every tensor set ``clients`` offered for ``tag`` this round, by pseudonym (``mailbox``:
        one the server cannot link to a client; ``plaintext``: the client's id)."""
        from securefg.federation.program import collect

        return collect.collect(self.exchange, tag, clients=clients)

    def reply(self, tag: str, outputs: Mapping[str, Tensors]) -> list[str]:
        """Each pseudonym's owner (from ``collect``) receives its tensors with its next step
        (``ClientContext.replied``); returns the pseudonyms."""
        from securefg.federation.program import collect

        return collect.reply(self.exchange, tag, outputs)

    def peer_sum(self, tag: str, target: str, *, peers: Iterable[str] | None = None) -> tuple[str, ...]:
        """``target`` gets the sum of what ``peers`` (default: every other live client) offered it
        for ``tag`` (``ClientContext.peer_summed``); the server only relays. Returns who is in it."""
        from securefg.federation.program import peer_sum

        return peer_sum.peer_sum(self.exchange, tag, target, peers)

    def shared_sum(self, tag: str, *, clients: Iterable[str] | None = None) -> tuple[str, ...]:
        """Every client in ``clients`` gets the sum of what they offered for ``tag``
        (``ClientContext.shared``; under ``blind_sum`` the server never reads it). Returns who is in it."""
        from securefg.federation.program import shared_sum

        return shared_sum.shared_sum(self.exchange, tag, clients)

    def send(self, tag: str, tensors: Tensors, *, to: str) -> None:
        """One point-to-point message to ``to`` (``ClientContext.sent``)."""
        from securefg.federation.program import point_to_point

        point_to_point.send(self.exchange, tag, tensors, to=to)


class ClientContext:
    """A client's side of one step, handed to its action handler.

    Args:
        exchange (ClientExchange): The party's exchange half.
        step (Step): The request being handled.
    """

    def __init__(self, exchange: ClientExchange, step: Step) -> None:
        self.exchange, self.step = exchange, step

    @property
    def party(self) -> Party:
        """This party's own state."""
        return self.exchange.rt.party

    @property
    def pid(self) -> str:
        return self.exchange.rt.party.pid

    @property
    def state(self) -> dict[str, Any]:
        return self.exchange.rt.party.state

    @property
    def round(self) -> int:
        return self.step.round

    @property
    def info(self) -> dict[str, InfoValue]:
        """The public facts the server sent with the request."""
        return {k: v for k, v in self.step.info.items() if k != "seq"}

    @property
    def clients(self) -> Sequence[str]:
        """Every client of the run (public)."""
        return self.exchange.clients

    def received(self, tag: str, like: Tensors | None = None) -> dict[str, torch.Tensor]:
        """What the server broadcast under ``tag`` this round."""
        return self.exchange.received(tag, self.round, like)

    def contribute(self, tag: str, tensors: Tensors, *, weight: float | None = None,
                   side: Tensors | None = None) -> None:
        """This client's input to the server's ``aggregate(tag)`` this round."""
        self.exchange.contribute(tag, self.round, tensors, weight=weight, side=side)

    def offer_similarity(self, tag: str, vector: torch.Tensor) -> None:
        """This client's private vector for the server's ``similarity(tag)`` this round."""
        self.exchange.halves["similarity"].offer(tag, self.round, vector)

    def offer_personalized(self, tag: str, tensors: Tensors) -> None:
        """This client's input to the server's ``personalized_aggregate(tag)`` this round."""
        self.exchange.halves["personalized"].offer(tag, self.round, tensors)

    def personalized(self, tag: str) -> dict[str, torch.Tensor]:
        """This client's own mix from ``personalized_aggregate(tag)`` this round."""
        return self.exchange.halves["personalized"].result(tag, self.round)

    def offer_relay(self, tag: str, item: bytes) -> None:
        """This client's item for the server's ``relay(tag)`` this round."""
        self.exchange.halves["relay"].offer(tag, self.round, item)

    def relayed(self, tag: str) -> list[bytes]:
        """The items this client received from ``relay(tag)`` this round."""
        return self.exchange.halves["relay"].relayed(tag, self.round)

    def offer_collect(self, tag: str, tensors: Tensors) -> None:
        """This client's input to the server's ``collect(tag)`` this round."""
        self.exchange.halves["collect"].offer(tag, self.round, tensors)

    def replied(self, tag: str, like: Tensors | None = None) -> dict[str, torch.Tensor]:
        """This client's own output of the server's ``reply(tag)`` this round."""
        return self.exchange.halves["collect"].replied(tag, self.round, like)

    def offer_peer(self, tag: str, target: str, tensors: Tensors) -> None:
        """This client's input to ``target``'s ``peer_sum(tag)`` this round."""
        self.exchange.halves["peer_sum"].contribute(tag, self.round, target, tensors)

    def peer_summed(self, tag: str) -> dict[str, torch.Tensor]:
        """The sum of this client's peers' inputs to its ``peer_sum(tag)`` this round."""
        return self.exchange.halves["peer_sum"].result(tag, self.round)

    def offer_shared(self, tag: str, tensors: Tensors) -> None:
        """This client's input to the server's ``shared_sum(tag)`` this round."""
        self.exchange.halves["shared_sum"].contribute(tag, self.round, tensors)

    def shared(self, tag: str) -> dict[str, torch.Tensor] | None:
        """The ``shared_sum(tag)`` this client received this round (``None``: it cannot read it)."""
        return self.exchange.halves["shared_sum"].result(tag, self.round)

    def send(self, tag: str, tensors: Tensors, *, to: str) -> None:
        """One point-to-point message to ``to``, forwarded by the server unopened."""
        self.exchange.halves["send"].send(tag, self.round, tensors, to=to)

    def sent(self, tag: str, *, sender: str | None = None) -> dict[str, Any]:
        """The ``send(tag)`` messages this client got this round: from ``sender`` (its tensors),
        or from everyone (``{sender: tensors}``)."""
        half = self.exchange.halves["send"]
        return half.received_all(tag, self.round) if sender is None else half.received(tag, self.round, sender=sender)


#: A method's client action: runs as the client on its own state; returns public reply info.
ClientAction = Callable[[ClientContext], Mapping[str, InfoValue] | None]

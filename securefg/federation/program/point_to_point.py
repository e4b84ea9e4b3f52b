"""Point-to-point ``send`` (``plaintext``) split by party.

The same envelope as ``Plaintext.run_send``: one envelope from the sender to the receiver (no
stage). The server's rides with the receiver's next step; a client's goes up with its reply and
the server forwards it, unopened, with the receiver's next step (star topology). The receiver
reads it in a later action (:meth:`SendHalf.received`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from securefg.errors import ConfigError, UnexpectedMessageError
from securefg.federation.codec import decode_tensors, encode_tensors
from securefg.federation.envelope import Envelope
from securefg.federation.exchange import from_wire, to_wire
from securefg.federation.party import SERVER
from securefg.federation.program.halves import client_half
from securefg.protocol.mechanism import ExchangeKind

Tensors = Mapping[str, torch.Tensor]


def _resolve(stack: Any, tag: str) -> Any:
    res = stack.resolve(tag, ExchangeKind.SEND)
    if res.mechanism.name != "plaintext":
        raise ConfigError(f"send tag {tag!r}: mechanism {res.mechanism.name!r} has no party-program halves")
    return res


def send(ex: Any, tag: str, tensors: Tensors, *, to: str) -> None:
    """As the server: send ``to`` one message of ``tensors`` this round."""
    ex.use_tag(tag, ExchangeKind.SEND)
    res = _resolve(ex.stack, tag)
    ex.rt.transport.send(Envelope(SERVER, (to,), ex.round, tag, encode_tensors(to_wire(res, tag, tensors))))


@client_half("send")
class SendHalf:
    """A client's half of ``send``: as a sender and as a receiver."""

    def __init__(self, ex: Any) -> None:
        self.ex = ex

    def send(self, tag: str, round: int, tensors: Tensors, *, to: str) -> None:
        """Send ``to`` one message of ``tensors`` (through the server, which forwards it unopened)."""
        res = _resolve(self.ex.stack, tag)
        pid = self.ex.rt.party.pid
        tensors = self.ex.deviate("send", tag, tensors)
        self.ex.rt.transport.send(Envelope(pid, (to,), round, tag, encode_tensors(to_wire(res, tag, tensors))))

    def received(self, tag: str, round: int, *, sender: str, like: Tensors | None = None) -> dict[str, torch.Tensor]:
        """The one message of ``tag`` from ``sender`` this round.

        Raises:
            UnexpectedMessageError: None came from ``sender``.
        """
        pid = self.ex.rt.party.pid
        got = self.ex.rt.transport.receive_from(pid, [sender], tag=tag, round=round)
        if sender not in got:
            raise UnexpectedMessageError(f"{pid} expected a {tag!r} message from {sender}")
        out = decode_tensors(got[sender].payload)
        return from_wire(out, like) if like is not None else out

    def received_all(self, tag: str, round: int) -> dict[str, dict[str, torch.Tensor]]:
        """Every message of ``tag`` this round, by sender."""
        envs = self.ex.rt.transport.receive(self.ex.rt.party.pid, tag=tag, round=round)
        out: dict[str, dict[str, torch.Tensor]] = {}
        for env in envs:
            if env.sender in out:
                raise UnexpectedMessageError(f"{self.ex.rt.party.pid} got two {tag!r} messages from {env.sender}")
            out[env.sender] = decode_tensors(env.payload)
        return out

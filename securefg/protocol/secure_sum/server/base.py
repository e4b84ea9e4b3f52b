"""The aggregator's stage machine: collect one stage's responses, check them, move on.

Shaped like fcp's ``secagg_server_state.h``: a stage checks every response, drops a
misbehaving client with a :class:`ClientDropReason` (it never trusts and never crashes on one
client's bytes), aborts the round only below threshold, and returns the next stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from securefg.errors import AuthenticationError, TooFewSurvivorsError, UnexpectedMessageError
from securefg.protocol.secure_sum.constants import ClientDropReason, Stage
from securefg.protocol.secure_sum.context import AggregatorContext
from securefg.protocol.secure_sum.route import Delivery


class ServerStage:
    """An aggregator stage waiting for the responses of ``expected`` clients.

    Args:
        ctx (AggregatorContext): The aggregator's private state for this call.
        expected (Iterable[str]): The clients asked at this stage.
    """

    stage: ClassVar[Stage | None] = None

    def __init__(self, ctx: AggregatorContext, expected: Iterable[str] = ()) -> None:
        self.ctx = ctx
        self.expected = frozenset(expected)

    def handle(self, deliveries: list[Delivery]) -> ServerStage:
        """Sort responses into readable ones and drops, then run the stage's logic.

        Raises:
            UnexpectedMessageError: for a message of another stage or from a party outside
                the round (a replay or a confused peer, not a dropout).
            TooFewSurvivorsError: when too few clients are left to continue.
        """
        ctx = self.ctx
        got: dict[str, bytes] = {}
        repeated: set[str] = set()
        for msg in deliveries:
            if self.stage is None or msg.stage is not self.stage:
                raise UnexpectedMessageError(
                    f"the aggregator is at {type(self).__name__} and does not accept {msg.stage.value!r}"
                )
            if msg.origin not in ctx.clients:
                raise UnexpectedMessageError(f"{msg.origin!r} is not a client of this round")
            if msg.origin not in self.expected or msg.origin in ctx.drops:
                continue  # not asked (already dropped): ignore what it says
            if msg.origin in got:
                repeated.add(msg.origin)
                continue
            try:
                got[msg.origin] = ctx.open(msg)
            except AuthenticationError:
                ctx.drop(msg.origin, ClientDropReason.MALFORMED_MESSAGE)
        for pid in repeated:
            got.pop(pid, None)
            ctx.drop(pid, ClientDropReason.MALFORMED_MESSAGE)
        for pid in self.expected - got.keys():
            ctx.drop(pid, ClientDropReason.NO_RESPONSE)
        return self.on_responses(got)

    def on_responses(self, got: Mapping[str, bytes]) -> ServerStage:
        raise UnexpectedMessageError(f"{type(self).__name__} accepts no message")

    def require(self, count: int, need: int, what: str) -> None:
        """Abort the round with :class:`TooFewSurvivorsError` when ``count < need``."""
        if count < need:
            stage = self.stage.value if self.stage else "setup"
            raise TooFewSurvivorsError(
                f"secure sum {self.ctx.info.tag!r} round {self.ctx.info.round}: only {count} {what} "
                f"at {stage}, fewer than the {need} required (threshold t = {self.ctx.threshold}); "
                "the round is aborted and no sum is revealed"
            )

"""The client's stage machine: the base stage rejects every message.

Shaped like fcp's ``secagg_client_state.h``: a stage implements only the message it expects,
and handling it returns the *next* stage. A failed check raises a typed error carrying the
reason; a client never logs and carries on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from securefg.errors import ForgedClaimError, InvalidClaimError, UnexpectedMessageError
from securefg.protocol.secure_sum.constants import AbortReason, Stage
from securefg.protocol.secure_sum.context import ClientContext
from securefg.protocol.secure_sum.route import Delivery


class ClientStage:
    """A client stage; the base one expects nothing.

    Args:
        ctx (ClientContext): The client's private state for this call.
    """

    expects: ClassVar[Stage | None] = None

    def __init__(self, ctx: ClientContext) -> None:
        self.ctx = ctx

    def handle(self, msg: Delivery) -> ClientStage:
        """Check that ``msg`` is the one this stage expects, then process it.

        Raises:
            UnexpectedMessageError: for a message of another stage, or not from the aggregator.
        """
        if self.expects is None or msg.stage is not self.expects:
            got = msg.stage.value
            raise UnexpectedMessageError(
                f"{self.ctx.pid} is at {type(self).__name__} and does not accept a {got!r} message"
            )
        if msg.origin != self.ctx.info.aggregator:
            raise UnexpectedMessageError(f"{self.ctx.pid} accepts {msg.stage.value!r} only from the aggregator")
        return self.on_message(self.ctx.open(msg))

    def on_message(self, payload: bytes) -> ClientStage:
        raise UnexpectedMessageError(f"{type(self).__name__} accepts no message")

    # ------------------------------------------------------------------- claim checks
    def refuse(self, reason: AbortReason, detail: str) -> InvalidClaimError:
        """The error a client raises when it refuses a server claim."""
        return InvalidClaimError(f"{self.ctx.pid} aborts: {detail} ({reason.value})", reason=reason)

    def forged(self, error: type[ForgedClaimError], reason: AbortReason, claim: str, detail: str) -> ForgedClaimError:
        """The error a client raises when a claim fails the pinned-key checks; ``claim`` names it."""
        return error(f"{self.ctx.pid} aborts: {claim} {detail} ({reason.value})", reason=reason, claim=claim)

    def check_ids(self, ids: Iterable[str], *, allowed: Iterable[str], what: str) -> set[str]:
        """Refuse duplicates and ids outside ``allowed``; return the ids as a set."""
        ids = list(ids)
        seen = set(ids)
        if len(seen) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise self.refuse(AbortReason.DUPLICATE_ID, f"the server lists {dup!r} twice in {what}")
        unknown = seen - set(allowed)
        if unknown:
            raise self.refuse(AbortReason.UNKNOWN_ID, f"{what} names unexpected ids {sorted(unknown)}")
        return seen


class Done(ClientStage):
    """After Unmask (or an abort): every further message is rejected."""

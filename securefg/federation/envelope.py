"""The envelope: the only thing that crosses a party boundary.

Shaped like Flower's ``Message``: routing metadata plus content *or* an error, never both.
``reply()`` builds a response from its request so sender, receiver, round and tag cannot be
mistyped. ``form`` says what the receiver can read (plaintext, masked, ciphertext, sealed);
the transcript and the audit's exposure ledger are built from it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Form(str, enum.Enum):
    """What a receiver can read of a payload."""

    PLAINTEXT = "plaintext"
    """Readable as is (model weights in the clear, public values)."""
    MASKED = "masked"
    """One-time-pad masked value of a secure sum: uniform to anyone without the masks."""
    CIPHERTEXT = "ciphertext"
    """CKKS ciphertext: readable only by a holder of the secret key."""
    SEALED = "sealed"
    """End-to-end AEAD-sealed item: readable only by its final recipient."""
    KEYS = "keys"
    """Public keys, key shares sealed to peers, or other protocol bookkeeping."""
    AGGREGATE = "aggregate"
    """An aggregate of several parties' values (e.g. a secure-sum result)."""


@dataclass(frozen=True)
class Envelope:
    """A message from one party to one or more others.

    Args:
        sender (str): Party id of the sender.
        receivers (tuple[str, ...]): Party ids of the receivers (each gets its own sealed copy).
        round (int): Training round (``-1`` for setup before round 0).
        tag (str): The method's message tag, e.g. ``"fedavg/update"``.
        payload (bytes): Content, already encoded by a codec. Empty when ``error`` is set.
        stage (str): Protocol stage inside a mechanism, e.g. ``"secure_sum/share_keys"``.
        form (Form): What the receivers can read of ``payload``.
        error (str, optional): An error report instead of content.
    """

    sender: str
    receivers: tuple[str, ...]
    round: int
    tag: str
    payload: bytes = b""
    stage: str = ""
    form: Form = Form.PLAINTEXT
    error: str | None = None

    def __post_init__(self) -> None:
        if not self.receivers:
            raise ValueError("an envelope needs at least one receiver")
        if isinstance(self.receivers, str):
            raise TypeError("receivers must be a tuple of party ids, not a string")
        if not isinstance(self.payload, bytes):
            raise TypeError(f"payload must be bytes, got {type(self.payload).__name__}")
        if self.error is not None and self.payload:
            raise ValueError("an envelope carries content or an error, never both")
        if self.sender in self.receivers:
            raise ValueError(f"{self.sender!r} cannot send an envelope to itself")

    @property
    def has_error(self) -> bool:
        """Whether this envelope reports an error instead of content."""
        return self.error is not None

    def reply(
        self,
        payload: bytes = b"",
        *,
        sender: str,
        stage: str | None = None,
        form: Form = Form.PLAINTEXT,
        error: str | None = None,
    ) -> Envelope:
        """Build the reply of ``sender`` (one of the receivers) to this envelope."""
        if sender not in self.receivers:
            raise ValueError(f"{sender!r} did not receive this envelope and cannot reply to it")
        return Envelope(
            sender=sender,
            receivers=(self.sender,),
            round=self.round,
            tag=self.tag,
            payload=payload,
            stage=self.stage if stage is None else stage,
            form=form,
            error=error,
        )

    def to(self, receiver: str) -> Envelope:
        """The copy of this envelope addressed to one receiver."""
        return replace(self, receivers=(receiver,))

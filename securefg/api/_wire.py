"""The frame around every message of the public API: a label, a stage name, the payload.

A transport that carries securefg's bytes sees only opaque ``bytes``; the frame lets the receiving
object check, before it parses anything, that a message belongs to this API and to the stage it
expects. Layout: ``length_prefixed(b"securefg/api/v1", stage, payload)`` (u32 little-endian
lengths, ``length_prefixed``); nothing may follow the payload.
"""

from __future__ import annotations

from securefg.errors import CodecError, InvalidInputError
from securefg.federation.channel import length_prefixed, split_length_prefixed

LABEL = b"securefg/api/v1"
MIN_SESSION_BYTES = 16
MAX_SESSION_BYTES = 64


def frame(stage: str, payload: bytes) -> bytes:
    """One message: ``stage`` names what ``payload`` is."""
    return length_prefixed(LABEL, stage.encode("utf-8"), payload)


def unframe(data: bytes, *, what: str) -> tuple[str, bytes]:
    """``(stage, payload)`` of a message built by ``frame``.

    Raises:
        CodecError: Not bytes, another label, a truncated field or trailing bytes.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise CodecError(f"{what}: a message must be bytes, got {type(data).__name__}")
    (label, stage, payload), end = split_length_prefixed(bytes(data), 3)
    if label != LABEL:
        raise CodecError(f"{what}: not a securefg API message (label {label[:32]!r})")
    if end != len(data):
        raise CodecError(f"{what}: {len(data) - end} trailing bytes after the payload")
    try:
        return stage.decode("utf-8"), payload
    except UnicodeDecodeError as exc:
        raise CodecError(f"{what}: the stage name is not utf-8") from exc


def check_call(session: bytes, round: int, tag: str) -> None:
    """Refuse a call identity every party could not agree on safely.

    Raises:
        InvalidInputError: ``session`` not 16..64 bytes, ``round`` not an integer >= 0, or an
            empty ``tag``.
    """
    if not isinstance(session, bytes) or not MIN_SESSION_BYTES <= len(session) <= MAX_SESSION_BYTES:
        raise InvalidInputError(
            f"session must be {MIN_SESSION_BYTES}..{MAX_SESSION_BYTES} bytes shared by every party of the run "
            "(e.g. os.urandom(16), drawn once per run), got "
            f"{len(session) if isinstance(session, bytes) else type(session).__name__}"
        )
    if isinstance(round, bool) or not isinstance(round, int) or round < 0:
        raise InvalidInputError(f"round must be an integer >= 0, got {round!r}")
    if not isinstance(tag, str) or not tag:
        raise InvalidInputError(f"tag must be a non-empty string, got {tag!r}")


def check_pid(pid: str, what: str = "party id") -> str:
    """A party id: a non-empty string."""
    if not isinstance(pid, str) or not pid:
        raise InvalidInputError(f"{what} must be a non-empty string, got {pid!r}")
    return pid

"""Which stack a run used: its content hash, and whether it is the shipped stack its name says.

A result names its stack, but a name is only a claim: a user file can call itself
``fedavg_secure_sum`` and carry the update in plaintext. Every result therefore also records
the SHA-256 of the stack's canonical content (:meth:`ProtocolStack.content`: name,
description, ``unsafe`` markers and every binding; not the path it was read from), whether that
content is one of the shipped stacks, and whether the name borrows a shipped stack's name (or
file name) while the content differs.

Shipped stacks are the files in the package's own ``protocols/`` folder, whatever
``SECUREFG_PROTOCOLS`` points to: a stack found through that variable is the user's.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from securefg.errors import ConfigError
from securefg.protocol.stack import ProtocolStack

SHIPPED_DIR = Path(__file__).resolve().parents[2] / "protocols"
"""The shipped stacks (the default of :func:`~securefg.protocol.stack.protocols_dir`)."""


def content_sha256(stack: ProtocolStack) -> str:
    """Hex SHA-256 of the stack's content as canonical JSON (sorted keys, no whitespace).

    TOML parses to the same values however a file is laid out (key order, inline or dotted
    tables, comments), so two files that say the same thing hash the same.
    """
    text = json.dumps(stack.content(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class ShippedStack:
    """One shipped stack file: its file stem, the name inside it and its content hash."""

    stem: str
    name: str
    sha256: str


@functools.lru_cache(maxsize=4)
def shipped_stacks(folder: Path = SHIPPED_DIR) -> tuple[ShippedStack, ...]:
    """Every stack of ``folder`` that loads (a broken one is reported by its own tests, not here)."""
    out = []
    for path in sorted(folder.glob("*.toml")):
        try:
            stack = ProtocolStack.load(path)
        except ConfigError:
            continue
        out.append(ShippedStack(path.stem, stack.name, content_sha256(stack)))
    return tuple(out)


@dataclass(frozen=True)
class StackIdentity:
    """What ``result.json`` records under ``"stack"``.

    Args:
        name (str): The name the stack gives itself.
        sha256 (str): :func:`content_sha256`.
        shipped (bool): The content equals a shipped stack's (under any file name).
        name_shadows_shipped (bool): The name equals a shipped stack's name or file stem, but
            the content is not that shipped stack's: the name does not say what ran.
        shipped_as (str, optional): The shipped file stem whose content this is.
    """

    name: str
    sha256: str
    shipped: bool
    name_shadows_shipped: bool
    shipped_as: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "shipped": self.shipped,
                "name_shadows_shipped": self.name_shadows_shipped, "shipped_as": self.shipped_as}


def identify(stack: ProtocolStack, *, folder: Path = SHIPPED_DIR) -> StackIdentity:
    """The identity of ``stack`` against the shipped stacks of ``folder``."""
    digest = content_sha256(stack)
    shipped = shipped_stacks(folder)
    same = [s for s in shipped if s.sha256 == digest]
    named = [s for s in shipped if stack.name in (s.name, s.stem)]
    shadows = bool(named) and not any(s in same for s in named)
    return StackIdentity(stack.name, digest, bool(same), shadows, same[0].stem if same else None)


def describe_identity(record: Mapping[str, Any]) -> str:
    """One line for a human view: empty for a shipped stack, otherwise what the name hides."""
    sha = str(record.get("sha256", ""))[:12]
    if record.get("name_shadows_shipped"):
        return f"NOT the shipped stack {record.get('name')!r} (same name, different content; sha256 {sha})"
    if not record or record.get("shipped", True):
        return ""
    return f"user stack (sha256 {sha})"


__all__ = ["SHIPPED_DIR", "ShippedStack", "StackIdentity", "content_sha256", "describe_identity", "identify",
           "shipped_stacks"]

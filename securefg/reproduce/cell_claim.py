"""A cell's run folder claimed by one process while it runs.

``securefg reproduce`` advises several invocations side by side on a few cores, and their cell
lists may overlap (two seeds lists, two row lists). Without a claim, both would run the same
unfinished cell into the same folder and overwrite each other's checkpoint and result. The claim
is an exclusive ``flock`` on ``<cell folder>/claim.lock``, taken without waiting and held for the
whole run: the kernel drops it when the holder exits, however it exits (a killed lane leaves no
stale claim to clean up). The file holds the holder's PID and host for the message the others
print; it is never deleted (deleting a lock file while another process has it open would let two
holders lock two different files).

Scope: processes on one machine sharing a local file system. ``flock`` over NFS is not relied on;
where ``fcntl`` does not exist (Windows) a claim always succeeds, as before this module.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

CLAIM_FILE = "claim.lock"


@dataclass(frozen=True)
class Holder:
    """Who holds a cell: what its claim file says (``pid`` 0 when the file is unreadable)."""

    pid: int
    host: str

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}" if self.pid else "another process"


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read_holder(path: Path) -> Holder:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Holder(int(data["pid"]), str(data["host"]))
    except (OSError, ValueError, KeyError, TypeError):
        return Holder(0, "")


@contextmanager
def _locked(path: Path) -> Iterator[IO[str] | None]:
    """The open claim file, locked by this process for the block, or ``None`` when another holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", encoding="utf-8") as handle:
        if not _try_lock(handle):
            yield None
            return
        try:
            yield handle
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def claimed(folder: str | Path) -> Iterator[Holder | None]:
    """Hold ``folder``'s claim for the ``with`` block and yield ``None``; yield the other
    :class:`Holder` instead (and hold nothing) when another process already holds it."""
    if fcntl is None:  # pragma: no cover - not POSIX
        yield None
        return
    path = Path(folder) / CLAIM_FILE
    with _locked(path) as handle:
        if handle is None:
            yield _read_holder(path)
            return
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "since": time.strftime("%Y-%m-%dT%H:%M:%S")}))
        handle.flush()
        yield None


def holder(folder: str | Path) -> Holder | None:
    """Who holds ``folder``'s claim now, or ``None`` (free, or never claimed). Probes by taking
    the lock for an instant (without writing), so it is exact for processes on this machine."""
    path = Path(folder) / CLAIM_FILE
    if fcntl is None or not path.is_file():
        return None
    with _locked(path) as handle:
        return _read_holder(path) if handle is None else None


__all__ = ["CLAIM_FILE", "Holder", "claimed", "holder"]

"""An exclusive advisory lock on a file, for writers in several processes that share one path.

Dataset work copies (PyG writes ``processed/`` in place) and the reproduce cell ledgers (one
file that several lanes of cells update) both need one writer at a time. POSIX ``flock``; on a
platform without ``fcntl`` (Windows) the lock is a no-op, as it was for the dataset copies.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def exclusive_lock(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_file`` (created if missing, left in place) for the block."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    with open(lock_file, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


__all__ = ["exclusive_lock"]

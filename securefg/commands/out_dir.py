"""The output folder of a command (``--out``), checked before any work starts.

Why: ``run`` and ``audit`` write their files only at the end, so an empty ``--out``, a file in
its place or a folder that cannot be written would otherwise surface after the whole run (or
never: ``--out ""`` used to mean "write nothing" and exit 0). Failing first, with a
:class:`~securefg.errors.ConfigError` that names the flag, costs nothing. Nothing is created
here: the command makes the folder when it writes, as before.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from securefg.errors import ConfigError


def check_out_dir(value: str | Path | None, *, flag: str = "--out") -> Path:
    """Check that ``value`` is a folder that exists and is writable, or can be created.

    The nearest existing folder on the way is tested with a real temporary file, since
    permission bits alone do not tell (root, ACLs, read-only mounts).

    Args:
        value (str or Path, optional): The folder given on the command line.
        flag (str, optional): The option's name, for the message. (default: ``"--out"``)

    Returns:
        Path: The folder (not created).

    Raises:
        ConfigError: Empty, a file (or a file in its path), or not writable.
    """
    if value is None or not str(value).strip():
        raise ConfigError(f"{flag} is empty: give the folder to write the results into")
    path = Path(value).expanduser()
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "is a file, not a folder" if existing == path else f"cannot be created: {existing} is a file"
        raise ConfigError(f"{flag} {path}: {where}; give a folder (it is created if missing)")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot write in {existing} ({exc.strerror or exc}); give a writable folder") from exc
    return path


__all__ = ["check_out_dir"]

"""A committed record of finished cells, so a table outlives the machine that ran it.

Run folders (``<out>/<setting>/<method>/seed<k>/result.json``) hold each cell's full result, but
they live on the machine that ran them and are not committed (they carry histories and caches).
The ledger is one small JSON file beside the results page, one compact record per finished cell:
the metrics the table reads, the run time, the device and where the record came from. The runner
writes a record as each cell ends and counts a recorded cell as finished, so a rerun on a fresh
machine runs only what no machine has finished yet.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from securefg.errors import InvalidInputError
from securefg.file_lock import exclusive_lock

#: Metrics a record keeps (everything the table, the targets, the per-dataset breakdown and the cost table read).
KEPT_METRICS = ("test_auc", "final_test_auc", "test_acc", "final_test_acc", "best_round", "val_auc", "val_acc",
                "test_auc_by_dataset", "global_val_auc", "mean_client_test_auc", "best_val", "final_test",
                "majority_baseline_test_acc")
#: Top-level result keys a record keeps (the stack, bytes and rounds feed the node tables' cost columns).
KEPT_KEYS = ("method", "seed", "device", "wall_seconds", "protocol", "bytes_total", "wire_bytes_total", "rounds",
             "rounds_run", "data_seed", "resumed_from_round")


#: The training values a record keeps from its run's config: without them a record could not show
#: that it ran at the local epochs its setting fixes, and it would run again once its folder is gone.
TRAIN_KEYS = ("lr", "weight_decay", "local_epochs")


def cell_key(setting: str, method: str, seed: int) -> str:
    """The record's key: ``"<setting>/<method>/seed<k>"`` (the run folder's relative path)."""
    return f"{setting}/{method}/seed{seed}"


def compact_record(setting: str, result: Mapping[str, Any], *, source: str, key: str | None = None) -> dict[str, Any]:
    """The part of a ``result.json`` the ledger keeps, with its provenance (``key``: the column's
    ledger name when it is not the bare method name, e.g. ``fedpub@plaintext``)."""
    metrics = result.get("metrics") or {}
    rec: dict[str, Any] = {k: result[k] for k in KEPT_KEYS if k in result}
    if key is not None and key != result.get("method"):
        rec["column"] = key
    config = result.get("config") or {}
    rec["config"] = {"dataset": config.get("dataset")}
    if isinstance(config.get("options"), Mapping):  # the column's options: a changed column reruns its cells
        rec["config"]["options"] = dict(config["options"])
    for k in TRAIN_KEYS:  # what the run trained with: a setting that fixes one (FED-PUB's E) checks the record
        if config.get(k) is not None:
            rec["config"][k] = config[k]
    rec["metrics"] = {k: _finite(metrics[k]) for k in KEPT_METRICS if k in metrics}
    preset = result.get("preset")
    if isinstance(preset, Mapping):  # what the preset set: a later study that changes it makes the cell stale
        rec["preset"] = {k: preset[k] for k in ("source", "applied") if k in preset}
    rec["setting"] = setting
    rec["source"] = source
    rec["recorded"] = _dt.date.today().isoformat()
    return rec


def _finite(value: Any) -> Any:
    """``value`` with NaN/inf numbers as ``None`` (strict JSON, and a record compares equal to itself)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    return value


class CellLedger:
    """The ledger file: ``{"cells": {key: record}}``, rewritten atomically on every change.

    Args:
        path (str | Path): The JSON file (created on the first record).

    Raises:
        InvalidInputError: The file exists but is not a ledger.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._cells, self._commands = self._read()
        #: keys recorded since the last write: they win over the file; every other key is the file's
        self._pending: set[str] = set()

    def _read(self) -> tuple[dict[str, dict[str, Any]], list[str]]:
        if not self.path.is_file():
            return {}, []
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidInputError(f"{self.path} is not a readable cell ledger: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("cells"), dict):
            raise InvalidInputError(f"{self.path} lacks the 'cells' object of a cell ledger")
        return data["cells"], list(dict.fromkeys(portable_command(str(c)) for c in data.get("commands", [])))

    def get(self, setting: str, column: str, seed: int, *, method: str | None = None) -> dict[str, Any] | None:
        """The record of one cell (``column``: the method, or its column key), or ``None``.

        Raises:
            InvalidInputError: The record under that key names another method or seed.
        """
        rec = self._cells.get(cell_key(setting, column, seed))
        if rec is None:
            return None
        want = method or column
        if (rec.get("method"), rec.get("seed")) != (want, seed):
            raise InvalidInputError(f"{self.path}: the record {cell_key(setting, column, seed)!r} holds the run "
                                    f"{(rec.get('method'), rec.get('seed'))}; fix or delete it")
        return rec

    def record(self, setting: str, result: Mapping[str, Any], *, source: str, column: str | None = None) -> None:
        """Add (or replace) one finished cell's record and write the file."""
        rec = compact_record(setting, result, source=source, key=column)
        key = cell_key(setting, column or str(rec.get("method")), int(rec.get("seed", -1)))
        self._cells[key] = rec
        self._pending.add(key)
        self._write()

    def add_command(self, command: str) -> None:
        """Log an invocation (the page lists every command that produced its cells)."""
        command = portable_command(command)
        if command not in self._commands:
            self._commands.append(command)
            self._write()

    @property
    def commands(self) -> list[str]:
        """The logged invocations, in first-seen order."""
        return list(self._commands)

    def __len__(self) -> int:
        return len(self._cells)

    def _write(self) -> None:
        """Merge with the file as it is now, then replace it atomically, under an exclusive lock:
        several ``reproduce`` invocations may share one ledger (one per lane of cells), and each
        keeps every record the others wrote since it loaded (the latest write of a cell wins)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.path.with_name(self.path.name + ".lock")):
            cells, commands = self._read()
            self._cells = {**self._cells, **{k: v for k, v in cells.items() if k not in self._pending}}
            self._pending.clear()
            self._commands = list(dict.fromkeys([*commands, *self._commands]))
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            body = {"about": "securefg reproduce: one compact record per finished cell (securefg/reproduce/cell_ledger.py)",
                    "commands": self._commands, "cells": dict(sorted(self._cells.items()))}
            tmp.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)


#: Every invocation's command, one a line, under a reproduction's output root (its page names them all).
COMMAND_LOG = "commands.txt"
#: Flags whose values are one machine's paths: the page names an invocation without them.
LOCAL_FLAGS = ("--out", "--ledger", "--page", "--data-root")


def portable_command(line: str) -> str:
    """``line`` without :data:`LOCAL_FLAGS` and their values (a line shlex cannot split is kept)."""
    try:
        words = shlex.split(line)
    except ValueError:
        return line
    kept, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w in LOCAL_FLAGS:
            skip = True
        elif not w.startswith(tuple(f + "=" for f in LOCAL_FLAGS)):
            kept.append(w)
    return shlex.join(kept)


def logged_commands(out_root: str | Path, ledger: CellLedger | None = None) -> list[str]:
    """The logged invocations, in first-seen order: the ledger's, then :data:`COMMAND_LOG`'s (which
    the ledger then keeps, so the page still names them once the output root is gone)."""
    log = Path(out_root) / COMMAND_LOG
    logged = [portable_command(x) for x in (log.read_text(encoding="utf-8").splitlines() if log.is_file() else [])
              if x.strip()]
    if ledger is not None:
        for line in logged:
            ledger.add_command(line)
    lines = (ledger.commands if ledger is not None else []) + logged
    return list(dict.fromkeys(lines)) or ["(no log of invocations under the output root)"]


__all__ = ["COMMAND_LOG", "KEPT_METRICS", "LOCAL_FLAGS", "CellLedger", "cell_key", "compact_record", "logged_commands",
           "portable_command"]

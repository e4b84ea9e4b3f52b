"""Run a list of cells in this process, resumably: a cell with a ``result.json`` or a ledger record is not rerun.

Each cell is one :func:`securefg.experiment.run_experiment` call, the code path of
``securefg run``, writing ``<cell folder>/result.json``. The file is written only when the run
ends, so its presence marks a finished cell; a finished cell is checked to be the cell asked for
(method, dataset, seed) so that a reused output folder cannot pass another experiment's result
off as this one's. One failing cell is reported and the others still run. With a
:class:`~securefg.reproduce.cell_ledger.CellLedger`, every finished cell is also recorded there
(the committed record that outlives the run folders) and a recorded cell counts as finished.
"""

from __future__ import annotations

import gc
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from securefg.errors import CheckpointError, InvalidInputError
from securefg.reproduce.cell_checkpoint import drop_checkpoint, resume_point, set_aside_checkpoint
from securefg.reproduce.cell_claim import Holder, claimed
from securefg.reproduce.cell_ledger import CellLedger, compact_record
from securefg.reproduce.cells import Cell, RunOverrides, run_config
from securefg.result_summary import load_result
from securefg.run_config import RunConfig

RunFn = Callable[[RunConfig], dict[str, Any]]


@dataclass
class CellOutcome:
    """What happened to one cell: ``"ran"`` (here, now), ``"done"`` (its run folder under the output
    root already held a result), ``"recorded"`` (only the ledger had it: it ran elsewhere, earlier,
    and was not rerun), ``"busy"`` (another process on this machine is running it now: skipped, see
    :mod:`securefg.reproduce.cell_claim`) or ``"failed"``."""

    cell: Cell
    status: str
    result: dict[str, Any] | None = None
    seconds: float = 0.0
    error: str = ""


def finished_result(cell: Cell, out_root: str | Path, ledger: CellLedger | None = None) -> dict[str, Any] | None:
    """The cell's ``result.json`` when it has one, else its ledger record, else ``None``.

    A run folder's result is recorded in the ledger when the ledger lacks it or holds other
    metrics for the cell (a rerun on this machine replaces an older record), so a table built
    on this machine and committed keeps the cell after the folder is gone. A stale folder (a run
    of what the column no longer is, :func:`preset_change`) is returned but never recorded.

    Raises:
        InvalidInputError: The file is unreadable, or belongs to another method, dataset or seed
            (delete it, or choose another ``--out``); or the ledger's record is inconsistent.
    """
    path = cell.folder(out_root) / "result.json"
    key, name = cell.method.key, cell.method.name
    if not path.is_file():
        return None if ledger is None else ledger.get(cell.setting.name, key, cell.seed, method=name)
    res = load_result(path)
    got = (res.get("method"), res["config"].get("dataset"), res.get("seed"))
    want = (name, cell.setting.dataset, cell.seed)
    if got != want:
        raise InvalidInputError(f"{path} holds the run {got}, not the cell {want}; delete it or choose another --out")
    protocol = cell.method.protocol
    if protocol is not None and "protocol" in res and res["protocol"] != protocol:  # a result naming none cannot be checked
        raise InvalidInputError(f"{path} ran under the stack {res.get('protocol')!r}, not the cell's {protocol!r}; "
                                "delete it or choose another --out")
    # the folder is this machine's current run of the cell (not a stale one): its record wins over an older one
    if ledger is not None and preset_change(cell, res) is None:
        rec = ledger.get(cell.setting.name, key, cell.seed, method=name)
        if rec is None or rec.get("metrics") != compact_record(cell.setting.name, res, source="")["metrics"]:
            ledger.record(cell.setting.name, res, source=f"run folder {cell.folder(out_root)}", column=key)
    return res


def preset_change(cell: Cell, result: Mapping[str, Any], overrides: RunOverrides | None = None) -> str | None:
    """Why a finished cell no longer is what its run would be today, or ``None``.

    A run with other options or another round count than its column asks for (the column
    changed) is stale.

    Each value today's preset would set is compared with the value the run used: its
    ``config`` (recorded after the preset was applied), else the method's option default, else
    what its preset block says it applied. A study that has since rewritten the preset makes
    the cell stale, so it runs again; a value that is the same (a preset now stating a default)
    does not. A result from before presets existed (no block) cannot be checked and is kept.
    """
    want = dict(cell.method.options)
    if overrides is not None:
        want.update(overrides.options.get(cell.method.name, {}))
    have = (result.get("config") or {}).get("options")
    if isinstance(have, Mapping):
        differ = {k: v for k, v in want.items() if not _same(have.get(k, _UNKNOWN), v)}
        if differ:
            return f"it ran with other options than the column's {differ} (it had {dict(have)})"
    today = run_config(cell, out_root=".", overrides=overrides)
    ran_rounds = result.get("rounds")
    if isinstance(ran_rounds, int) and ran_rounds != today.rounds:  # (one-shot CeFGC records none)
        return f"it ran {ran_rounds} rounds; the column asks for {today.rounds}"
    fixed = cell.setting.local_epochs
    if fixed is not None:  # the paper fixes them for the setting: a run with others is another cell
        ran = _values_used(cell.method.name, result).get("local_epochs", _UNKNOWN)
        if not _same(ran, fixed):
            return f"it ran {'an unknown number of' if ran is _UNKNOWN else ran} local epochs; the setting fixes {fixed}"
    block = result.get("preset")
    if not isinstance(block, Mapping) or block.get("enabled") is False:
        return None
    from securefg.presets import apply_preset

    _, now = apply_preset(today)
    used = _values_used(cell.method.name, result)
    changed = {k: v for k, v in (now.get("applied") or {}).items() if not _same(used.get(k, _UNKNOWN), v)}
    if not changed:
        return None
    was = {k: used.get(k, "unknown") for k in changed}
    return f"its preset changed ({now.get('source')}: {changed}; the run used {was})"


_UNKNOWN = object()


def _values_used(method: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """``{"lr": .., "options.dropout": ..}`` as the run used them, as far as the result tells."""
    block = result.get("preset") or {}
    used: dict[str, Any] = dict(block.get("applied") or {})
    config = result.get("config") or {}
    from securefg.methods.base import method_class

    mcls = method_class(method)
    try:  # a run that set no value used the method's own (most methods' defaults need no task)
        base = mcls.train_defaults(None) if hasattr(mcls, "train_defaults") else None
    except Exception:  # noqa: BLE001 - defaults that need the task stay unknown (the cell then reruns)
        base = None
    for key in ("lr", "weight_decay", "local_epochs"):
        if config.get(key) is not None:
            used[key] = config[key]
        elif key not in used and base is not None and "config" in result:
            used[key] = getattr(base, key)
        elif key == "local_epochs" and key not in used and "config" in result and not hasattr(mcls, "train_defaults"):
            used[key] = 1  # experiment_data.default_train_config: one local epoch on every task
    if "options" in config:
        defaults = mcls.option_defaults
        used.update({f"options.{k}": v for k, v in defaults.items()})
        used.update({f"options.{k}": v for k, v in (config.get("options") or {}).items()})
    return used


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))
    return a == b


def run_cells(
    cells: Sequence[Cell],
    *,
    out_root: str | Path,
    device: str = "auto",
    data_root: str | None = None,
    generator_cache: str | Path | None = None,
    run_fn: RunFn | None = None,
    show_progress: bool = True,
    ledger: CellLedger | None = None,
    overrides: RunOverrides | None = None,
    checkpoint_every: int = 0,
) -> list[CellOutcome]:
    """Run every unfinished cell, one after the other, and report each as it ends.

    Args:
        cells (Sequence[Cell]): The cells, in running order.
        out_root (str | Path): Output root; a cell writes under :meth:`Cell.folder`.
        device (str): ``--device`` of every run. (default: ``"auto"``)
        data_root (str, optional): Dataset root (default: ``$SECUREFG_DATA``).
        generator_cache (str | Path, optional): Folder of cached CeFGC generators, shared by all
            cells, so CeFGC+ reuses CeFGC's and a rerun reuses both.
        run_fn (Callable, optional): The experiment function (tests count its calls). (default:
            :func:`securefg.experiment.run_experiment`, imported only when a cell runs)
        show_progress (bool): A rich bar on a terminal, plain lines otherwise. (default: ``True``)
        ledger (CellLedger, optional): Where finished cells are recorded; its cells count as finished.
        overrides (RunOverrides, optional): ``--quick``'s changes to every cell (fewer rounds).
        checkpoint_every (int): A running cell checkpoints into its folder every this many rounds,
            and an interrupted one resumes from there (:mod:`securefg.reproduce.cell_checkpoint`);
            0 = no checkpoints, an interrupted cell starts over. (default: ``0``)

    Returns:
        One :class:`CellOutcome` per cell, in order.
    """
    if run_fn is None:
        from securefg.experiment import run_experiment

        run_fn = run_experiment
    outcomes: list[CellOutcome] = []
    with CellProgress(len(cells), enabled=show_progress) as progress:
        for i, cell in enumerate(cells):
            found = finished_result(cell, out_root, ledger)
            stale = None if found is None else preset_change(cell, found, overrides)
            if stale is not None:
                progress.stale(i, cell, stale)
                found = None
            if found is not None:
                here = (cell.folder(out_root) / "result.json").is_file()
                outcomes.append(CellOutcome(cell, "done" if here else "recorded", found))
                where = ledger.path if ledger is not None else "the ledger"
                progress.finished(i, cell, "finished earlier (kept)" if here else f"recorded in {where}, not rerun",
                                  found)
                continue
            with claimed(cell.folder(out_root)) as other:
                if other is not None:  # another invocation is running this very cell now
                    outcomes.append(CellOutcome(cell, "busy", error=f"running in {other}"))
                    progress.busy(i, cell, other)
                    continue
                if (cell.folder(out_root) / "result.json").is_file():  # it finished while we looked
                    found = finished_result(cell, out_root, ledger)
                    if found is not None and preset_change(cell, found, overrides) is None:
                        outcomes.append(CellOutcome(cell, "done", found))
                        progress.finished(i, cell, "finished by another process meanwhile (kept)", found)
                        continue
                outcomes.append(_run_one(i, cell, progress, run_fn, ledger, device,
                                         run_config(cell, out_root=out_root, device=device, data_root=data_root,
                                                    generator_cache=generator_cache, overrides=overrides,
                                                    checkpoint_every=checkpoint_every)))
            gc.collect()  # the federation of a finished run held every party's state
    return outcomes


def _run_one(i: int, cell: Cell, progress: CellProgress, run_fn: RunFn, ledger: CellLedger | None, device: str,
             cfg: RunConfig) -> CellOutcome:
    """Run one claimed cell (from its checkpoint, if it left one); record it in the ledger when it
    finishes; a failure is an outcome."""
    start = resume_point(cfg)
    progress.starting(i, cell, start.note)
    t0 = time.perf_counter()
    try:
        try:
            result = run_fn(start.config)
        except CheckpointError as exc:  # raised before round one: starting over loses only the setup
            if not start.config.resume:
                raise
            progress.starting(i, cell, set_aside_checkpoint(cfg, f"its checkpoint could not be restored ({exc})"))
            result = run_fn(cfg)
    except Exception as exc:  # noqa: BLE001 - one broken cell must not lose the rest of the sweep
        outcome = CellOutcome(cell, "failed", None, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
        progress.failed(i, cell, outcome.error, traceback.format_exc())
        return outcome
    drop_checkpoint(cfg)
    clean = {k: v for k, v in result.items() if not k.startswith("_")}
    outcome = CellOutcome(cell, "ran", clean, time.perf_counter() - t0)
    if ledger is not None:
        ledger.record(cell.setting.name, clean, source=f"securefg reproduce on {clean.get('device', device)}",
                      column=cell.method.key)
    resumed = clean.get("resumed_from_round")
    progress.finished(i, cell, f"ran in {outcome.seconds:.0f} s"
                      + (f" (resumed at round {resumed})" if resumed is not None else ""), clean)
    return outcome


class CellProgress:
    """Per-cell progress: a rich bar with the current cell on a terminal, and one line per cell."""

    def __init__(self, total: int, *, enabled: bool = True) -> None:
        self.total, self.enabled = total, enabled
        self._bar: Any = None

    def __enter__(self) -> CellProgress:  # noqa: PYI034 - Self needs Python 3.11
        if self.enabled and sys.stderr.isatty():
            try:
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                )
            except ImportError:  # rich is optional: plain lines then
                return self
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            self._bar.start()
            self._task = self._bar.add_task("cells", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def _line(self, text: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.console.print(text, highlight=False)
        else:
            print(text, flush=True)

    def starting(self, i: int, cell: Cell, note: str | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=str(cell))
            if note:
                self._line(f"[{i + 1}/{self.total}] {cell}: {note}")
        else:
            self._line(f"[{i + 1}/{self.total}] {cell}: running" + (f" ({note})" if note else ""))

    def finished(self, i: int, cell: Cell, what: str, result: dict[str, Any]) -> None:
        metrics = result.get("metrics") or {}
        auc, acc = metrics.get("test_auc"), metrics.get("test_acc")
        score = (f"test AUC {auc:.4f}" if isinstance(auc, float) else
                 f"test accuracy {100 * acc:.2f}%" if isinstance(acc, float) else "no test score")
        self._line(f"[{i + 1}/{self.total}] {cell}: {score}, {what}")
        if self._bar is not None:
            self._bar.advance(self._task)

    def stale(self, i: int, cell: Cell, why: str) -> None:
        self._line(f"[{i + 1}/{self.total}] {cell}: finished earlier but {why}: running it again")

    def busy(self, i: int, cell: Cell, other: Holder) -> None:
        self._line(f"[{i + 1}/{self.total}] {cell}: running in {other} now, skipped (rerun this command once it "
                   "ends to pick its result up)")
        if self._bar is not None:
            self._bar.advance(self._task)

    def failed(self, i: int, cell: Cell, error: str, trace: str) -> None:
        self._line(f"[{i + 1}/{self.total}] {cell}: FAILED {error}")
        print(trace, file=sys.stderr, flush=True)
        if self._bar is not None:
            self._bar.advance(self._task)


__all__ = ["CellOutcome", "CellProgress", "finished_result", "preset_change", "run_cells"]

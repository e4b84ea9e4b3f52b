"""A cell interrupted part-way resumes from its own checkpoint instead of starting over.

Some cells run for hours on a laptop (FED-PUB under CKKS on 30 overlapping clients), longer than a
working session. With ``checkpoint_every`` set, a cell's run writes ``<cell folder>/checkpoint.pt``
every that many rounds (:class:`~securefg.federation.runner.RoundRunner`); the next invocation that
claims the cell continues from it, so an interruption loses at most those rounds. A checkpoint of
another configuration (the column's preset changed since), or one the method fails to restore, is
set aside, never resumed into the new run, and the cell starts over. A method that cannot resume at
all (``Method.resumable``) writes none. A finished cell drops its checkpoint: ``result.json`` is the record,
and a checkpoint holds every party's state (195 MB for FED-PUB on 30 clients under CKKS).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from securefg.run_config import RunConfig, run_fingerprint

#: What a set-aside checkpoint is renamed to (kept for inspection; the next stale one replaces it).
STALE_SUFFIX = ".stale"


@dataclass(frozen=True)
class ResumePoint:
    """How a claimed cell starts: its configuration, and a line saying so when it does not start at round 0
    or a checkpoint was set aside (``None`` for a plain fresh start)."""

    config: RunConfig
    note: str | None = None


def resume_point(cfg: RunConfig) -> ResumePoint:
    """``cfg`` set to resume from its folder's checkpoint when that checkpoint is of this very run.

    A checkpoint that cannot be read, or whose fingerprint is not ``cfg``'s, is renamed to
    ``checkpoint.pt.stale`` and the run starts over; nothing is deleted.
    """
    from securefg.federation.runner import CHECKPOINT

    if not cfg.checkpoint_every or cfg.out is None:
        return ResumePoint(cfg)
    path = Path(cfg.out) / CHECKPOINT
    if not path.is_file():
        return ResumePoint(cfg)
    import torch

    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
        found, next_round = state.get("fingerprint"), int(state["next_round"])
    except Exception as exc:  # noqa: BLE001 - a torn or foreign file: set it aside, start over
        return ResumePoint(cfg, _set_aside(path, f"its checkpoint is unreadable ({type(exc).__name__}: {exc})"))
    want = run_fingerprint(cfg)
    if found != want:
        return ResumePoint(cfg, _set_aside(path, f"its checkpoint is of another configuration ({found} != {want})"))
    return ResumePoint(replace(cfg, resume=True), f"resuming from its checkpoint at round {next_round}")


def checkpoint_round(folder: str | Path) -> int | None:
    """The round an unfinished cell's checkpoint would resume at (``--dry-run`` shows it), or
    ``None`` when its folder holds none (or an unreadable one)."""
    from securefg.federation.runner import CHECKPOINT

    path = Path(folder) / CHECKPOINT
    if not path.is_file():
        return None
    import torch

    try:
        return int(torch.load(path, weights_only=True, map_location="cpu")["next_round"])
    except Exception:  # noqa: BLE001 - the run itself will set it aside and say why
        return None


def drop_checkpoint(cfg: RunConfig) -> None:
    """Delete a finished cell's checkpoint (its ``result.json`` now holds what counts)."""
    from securefg.federation.runner import CHECKPOINT

    if cfg.out is not None:
        (Path(cfg.out) / CHECKPOINT).unlink(missing_ok=True)


def set_aside_checkpoint(cfg: RunConfig, why: str) -> str:
    """Rename the cell's checkpoint out of the way (it could not be restored); the line saying so."""
    from securefg.federation.runner import CHECKPOINT

    assert cfg.out is not None
    return _set_aside(Path(cfg.out) / CHECKPOINT, why)


def _set_aside(path: Path, why: str) -> str:
    aside = path.with_name(path.name + STALE_SUFFIX)
    path.replace(aside)
    return f"{why}: set aside as {aside.name}, starting over"


__all__ = ["STALE_SUFFIX", "ResumePoint", "checkpoint_round", "drop_checkpoint", "resume_point", "set_aside_checkpoint"]

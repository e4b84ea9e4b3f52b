"""A cell interrupted part-way resumes from its own checkpoint instead of starting over.

Some cells run for hours on a laptop (FED-PUB under CKKS on 30 overlapping clients), longer than a
working session. With ``checkpoint_every`` set, a cell's run writes ``<cell folder>/checkpoint.pt``
every that many rounds (:class:`~securefg.federation.runner.RoundRunner`); the next invocation that
claims the cell continues from it, so an interruption loses at most those rounds. A checkpoint of
another configuration (the column's preset changed since), an unreadable one, or one the method
fails to restore (the round runner refuses each with a ``CheckpointError`` before round one) is set
aside, never resumed into the new run, and the cell starts over. A method that cannot resume at
all (``Method.resumable``) writes none. A finished cell drops its checkpoint: ``result.json`` is the record,
and a checkpoint holds every party's state (195 MB for FED-PUB on 30 clients under CKKS).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from securefg.run_config import RunConfig

#: What a set-aside checkpoint is renamed to (kept for inspection; the next stale one replaces it).
STALE_SUFFIX = ".stale"


@dataclass(frozen=True)
class ResumePoint:
    """How a claimed cell starts: its configuration, and a line saying so when it resumes (``None``
    for a fresh start)."""

    config: RunConfig
    note: str | None = None


def resume_point(cfg: RunConfig) -> ResumePoint:
    """``cfg`` set to resume when its folder holds a checkpoint (and the cell checkpoints at all).

    Whether the checkpoint is this very run's is the round runner's check (its fingerprint, its
    readability, the method's restore): a :class:`~securefg.errors.CheckpointError` from the run
    then means :func:`set_aside_checkpoint` and a fresh start (:mod:`securefg.reproduce.cell_runner`).
    """
    from securefg.federation.runner import CHECKPOINT

    if not cfg.checkpoint_every or cfg.out is None or not (Path(cfg.out) / CHECKPOINT).is_file():
        return ResumePoint(cfg)
    return ResumePoint(replace(cfg, resume=True), "resuming from its checkpoint")


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
    """Rename the cell's checkpoint out of the way (the run refused it); the line saying so."""
    from securefg.federation.runner import CHECKPOINT

    assert cfg.out is not None
    path = Path(cfg.out) / CHECKPOINT
    aside = path.with_name(path.name + STALE_SUFFIX)
    path.replace(aside)
    return f"{why}: set aside as {aside.name}, starting over"


__all__ = ["STALE_SUFFIX", "ResumePoint", "checkpoint_round", "drop_checkpoint", "resume_point", "set_aside_checkpoint"]

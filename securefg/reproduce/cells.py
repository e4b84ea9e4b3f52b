"""What one reproduction cell is: a data setting, a method column (with its stack) and a seed.

Shared by every ``securefg reproduce <paper>``: each cell is one ``securefg run``
(:func:`run_config`), written under ``<out>/<setting>/<column key>/seed<k>``. A column is a
registered method under one stack (plaintext, or the method's protected default) with fixed
options, so one paper row ("FedStruct (Hop2Vec)") gives two columns, ``fedstruct.hop2vec@plaintext``
and ``fedstruct.hop2vec@protected``, and each is resumed and recorded on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from securefg.run_config import RunConfig

#: ``MethodSpec.stack`` values: the plaintext stack, or the method's default (protected) stack.
PLAINTEXT, PROTECTED = "plaintext", "protected"


@dataclass(frozen=True)
class Setting:
    """One data setting of a table (one column of the paper's table).

    Args:
        name (str): Column name in the page and folder name (``"Cora 10"``, ``"MUTAG"``).
        kind (str): Free-form group (``"single-dataset"``, ``"disjoint"``, ``"overlapping"``).
        dataset (str): The ``--dataset`` value.
        clients (int): ``--clients``. (default: ``3``)
        partition (str, optional): ``--partition`` (default: the dataset's/method's default).
        rounds (int, optional): Round count for columns that do not fix their own.
        split (tuple, optional): ``--split`` train/val/test fractions.
        data_seed (int, optional): ``--data-seed`` (one data split for every run seed).
        paper_column (tuple[int, int], optional): (table index, column index) of this setting's
            cells in the method's section of targets.md (column 0 is the row label).
        local_epochs (int, optional): ``--local-epochs`` of every row, where the paper fixes them
            per dataset for every method it compares (FED-PUB: 3 on Computers); otherwise each
            method's preset or default.
    """

    name: str
    kind: str
    dataset: str
    clients: int = 3
    partition: str | None = None
    rounds: int | None = None
    split: tuple[float, float, float] | None = None
    data_seed: int | None = None
    paper_column: tuple[int, int] | None = None
    local_epochs: int | None = None

    @property
    def folder_name(self) -> str:
        """The setting's folder (spaces and slashes are awkward in paths)."""
        return self.name.replace(" ", "_").replace("/", "-")


@dataclass(frozen=True)
class MethodSpec:
    """One method column: a registered method, how it is run, and under which stack.

    Args:
        name (str): The registered method (``securefg run --method``).
        label (str): The paper's name for the row.
        rounds (int): ``--rounds``; ``0`` takes the setting's round count.
        stack (str, optional): ``"plaintext"``, ``"protected"`` (the method's default stack) or
            a stack name; ``None`` is the default stack (the CeFGC table's columns).
        variant (str): Distinguishes two columns of one method (``"hop2vec"``). (default: ``""``)
        options (tuple): ``--option`` pairs every run of this column gets.
        row (str): The paper's row label this column reproduces (default: ``label``).
        pinned (str): The stack a ``"protected"`` (or default-stack) column runs instead of the
            method's default (a paper's column keeps the stack it was measured under when the
            method's default moves on; the column's key stays ``<name>@protected``, or the bare
            name). (default: ``""``)
    """

    name: str
    label: str
    rounds: int = 0
    stack: str | None = None
    variant: str = ""
    options: tuple[tuple[str, Any], ...] = ()
    row: str = ""
    pinned: str = ""

    @property
    def key(self) -> str:
        """Folder and ledger name: ``name[.variant][@stack]`` (the bare name for the CeFGC columns)."""
        key = f"{self.name}.{self.variant}" if self.variant else self.name
        return f"{key}@{self.stack}" if self.stack else key

    @property
    def row_label(self) -> str:
        return self.row or self.label

    @property
    def protocol(self) -> str | None:
        """``--protocol``: ``None`` for the default stack."""
        if self.stack in (None, PROTECTED) and self.pinned:
            return self.pinned
        return None if self.stack in (None, PROTECTED) else self.stack

    @property
    def trains_generators(self) -> bool:
        """Whether the method trains CeFGC diffusion generators (and so uses the generator cache)."""
        return self.name.startswith("cefgc")

    def rounds_in(self, setting: Setting) -> int:
        """The round count of this column in ``setting``."""
        return self.rounds or setting.rounds or 100


@dataclass(frozen=True)
class Cell:
    """One run: a setting, a method column and a seed (the seed fixes initialisation and draws,
    and the split too unless the setting fixes ``data_seed``)."""

    setting: Setting
    method: MethodSpec
    seed: int

    def folder(self, root: str | Path) -> Path:
        """Where this cell writes its ``result.json``."""
        return Path(root) / self.setting.folder_name / self.method.key / f"seed{self.seed}"

    @property
    def column_name(self) -> str:
        """``Setting / row [stack]``: what every seed of this cell shares."""
        stack = f" [{self.method.stack}]" if self.method.stack else ""
        return f"{self.setting.name} / {self.method.label}{stack}"

    def __str__(self) -> str:
        return f"{self.column_name} / seed {self.seed}"


@dataclass(frozen=True)
class RunOverrides:
    """What ``--quick`` changes in every cell: a round cap, and extra options per method
    (``{"fedsage_plus": {"gen_local_steps": 5}}``); empty for the paper's settings."""

    rounds: int | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def run_config(
    cell: Cell,
    *,
    out_root: str | Path,
    device: str = "auto",
    data_root: str | None = None,
    generator_cache: str | Path | None = None,
    overrides: RunOverrides | None = None,
    checkpoint_every: int = 0,
) -> RunConfig:
    """The ``securefg run`` configuration of one cell (the stack the column names); with
    ``checkpoint_every`` its run checkpoints into the cell folder (see
    :mod:`securefg.reproduce.cell_checkpoint`), unless the method cannot resume a run."""
    options: dict[str, object] = dict(cell.method.options)
    if cell.method.trains_generators and generator_cache is not None:
        options["generator_cache"] = str(generator_cache)
    rounds = cell.method.rounds_in(cell.setting)
    if checkpoint_every:
        from securefg.methods.base import method_class

        checkpoint_every = checkpoint_every if method_class(cell.method.name).resumable else 0
    if overrides is not None:
        rounds = min(rounds, overrides.rounds) if overrides.rounds else rounds
        options.update(overrides.options.get(cell.method.name, {}))
    return RunConfig(
        method=cell.method.name, dataset=cell.setting.dataset, partition=cell.setting.partition,
        clients=cell.setting.clients, rounds=rounds, protocol=cell.method.protocol, seed=cell.seed,
        data_seed=cell.setting.data_seed, split=cell.setting.split, data_root=data_root, device=device,
        local_epochs=cell.setting.local_epochs,
        out=str(cell.folder(out_root)), options=options, progress=False, checkpoint_every=checkpoint_every,
    )


__all__ = ["PLAINTEXT", "PROTECTED", "Cell", "MethodSpec", "RunOverrides", "Setting", "run_config"]

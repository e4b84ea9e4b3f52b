"""Each method's search space: the hyperparameters its docstring documents, with ranges around
the paper's (or the reference code's) value, so the value a run uses today is always inside.

Names are ``lr``, ``weight_decay``, ``local_epochs`` (the :class:`~securefg.run_config.RunConfig`
fields) or ``options.<key>`` (a method option).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from securefg.errors import ConfigError

OPTION_PREFIX = "options."


@dataclass(frozen=True)
class Param:
    """One searched hyperparameter.

    Args:
        name (str): ``lr``, ``weight_decay``, ``local_epochs`` or ``options.<key>``.
        low (float): Smallest value.
        high (float): Largest value.
        log (bool): Sample on a log scale. (default: :obj:`False`)
        integer (bool): An integer parameter. (default: :obj:`False`)
        step (float, optional): Draw only ``low + k * step`` (a coarse grid when each trial is
            expensive). (default: :obj:`None`, any value)
    """

    name: str
    low: float
    high: float
    log: bool = False
    integer: bool = False
    step: float | None = None

    def suggest(self, trial: Any) -> float | int:
        """Draw this parameter from an Optuna trial."""
        if self.integer:
            return int(trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log,
                                         step=int(self.step or 1)))
        return float(trial.suggest_float(self.name, self.low, self.high, log=self.log, step=self.step))

    def to_json(self) -> dict[str, Any]:
        """The parameter as the study record lists it."""
        out: dict[str, Any] = {"name": self.name, "low": self.low, "high": self.high, "log": self.log,
                               "type": "int" if self.integer else "float"}
        if self.step is not None:
            out["step"] = self.step
        return out


_LR = Param("lr", 1e-3, 5e-2, log=True)
_EPOCHS = Param("local_epochs", 1, 5, integer=True)
_SAGE = (_LR, Param("weight_decay", 1e-5, 1e-3, log=True), _EPOCHS, Param("options.dropout", 0.0, 0.7))

#: Search space per method (FED-PUB: its class docstring's lambda1/lambda2; FedSheafHN: the
#: hypernetwork step and the generated-layer weight decay; FedStruct: the NSF step and both
#: dropouts; FedSage(+): the classifier's training).
SPACES: dict[str, tuple[Param, ...]] = {
    "fedpub": (_LR, Param("weight_decay", 1e-7, 1e-3, log=True), _EPOCHS,
               Param("options.l1", 1e-4, 1e-2, log=True), Param("options.loc_l2", 1e-4, 1e-2, log=True)),
    "fedsheafhn": (Param("lr", 5e-3, 5e-2, log=True), Param("weight_decay", 1e-5, 1e-3, log=True),
                   Param("local_epochs", 1, 15, integer=True), Param("options.dropout", 0.0, 0.6),
                   Param("options.hn_lr", 1e-3, 3e-2, log=True), Param("options.generated_wd", 1e-5, 1e-3, log=True)),
    "fedstruct": (Param("lr", 5e-4, 2e-2, log=True), Param("weight_decay", 1e-5, 5e-3, log=True),
                  Param("options.lr_structure", 5e-4, 2e-2, log=True), Param("options.dropout", 0.0, 0.7),
                  Param("options.input_dropout", 0.0, 0.7)),
    "fedsage": _SAGE,
    "fedsage_plus": _SAGE,
}


def space_for(method: str, only: list[str] | None = None) -> tuple[Param, ...]:
    """The search space of ``method``, restricted to the names in ``only`` when given.

    Raises:
        ConfigError: The method has no search space, or ``only`` names a parameter outside it.
    """
    key = method.lower().replace("-", "_")
    if key not in SPACES:
        raise ConfigError(f"securefg tune has no search space for {method!r}; choices: {sorted(SPACES)}")
    space = SPACES[key]
    if only:
        names = [p.name for p in space]
        unknown = [n for n in only if n not in names]
        if unknown:
            raise ConfigError(f"--params {unknown} are not in {key}'s search space {names}")
        space = tuple(p for p in space if p.name in only)
    return space


def with_ranges(space: tuple[Param, ...], ranges: list[str]) -> tuple[Param, ...]:
    """``space`` with the ranges ``NAME=LOW:HIGH[:STEP]`` put in place of the documented ones.

    Why: a study whose best value sits at the edge of its range has not found the best value; the
    next study widens that range. The study record lists the range it searched.

    Raises:
        ConfigError: A malformed item, a name outside ``space``, ``LOW >= HIGH``, a step that is
            not positive (or not whole for an integer parameter, or given with a log scale).
    """
    by_name = {p.name: p for p in space}
    for item in ranges:
        name, sep, bounds = item.partition("=")
        parts = bounds.split(":")
        if not sep or len(parts) not in (2, 3):
            raise ConfigError(f"--range expects NAME=LOW:HIGH or NAME=LOW:HIGH:STEP, got {item!r}")
        if name not in by_name:
            raise ConfigError(f"--range names {name!r}, which is not searched; searched: {sorted(by_name)}")
        try:
            low, high, *rest = (float(v) for v in parts)
        except ValueError:
            raise ConfigError(f"--range {item!r}: LOW, HIGH and STEP must be numbers") from None
        old = by_name[name]
        step = rest[0] if rest else None
        if not low < high or (old.log and low <= 0):
            raise ConfigError(f"--range {item!r}: need LOW < HIGH{' and LOW > 0 (log scale)' if old.log else ''}")
        if step is not None and (not step > 0 or old.log or (old.integer and step != int(step))):
            raise ConfigError(f"--range {item!r}: STEP must be positive, whole for an integer parameter, "
                              "and is not allowed on a log scale")
        if old.integer and (low != int(low) or high != int(high)):
            raise ConfigError(f"--range {item!r}: {name} is an integer; LOW and HIGH must be whole")
        by_name[name] = Param(name, low, high, log=old.log, integer=old.integer, step=step)
    return tuple(by_name[p.name] for p in space)


__all__ = ["OPTION_PREFIX", "SPACES", "Param", "space_for", "with_ranges"]

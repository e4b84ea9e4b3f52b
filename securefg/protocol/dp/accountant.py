"""The privacy accountant: a ledger of Gaussian releases and their (epsilon, delta) per client.

Each party keeps its own :class:`PrivacyAccountant` in its private state (see
:func:`accountant_of`): the server records what it releases about each contributor (central and
distributed noise), a client records what it releases about itself (local noise, DP-SGD). At
the end of a run :func:`~securefg.protocol.dp.report.privacy_report` merges them. Epsilons come
from Opacus' RDP accountant (Mironov 2017; https://arxiv.org/abs/1702.07476) and PRV accountant
(Gopi, Lee and Wutschitz 2021; https://arxiv.org/abs/2106.02848), created by name through
Opacus' accountant registry; nothing here re-derives them.

Two views per release, because they protect against different parties:

* ``output``: what anyone who sees the *released* value learns (the model the server
  broadcasts, the sum a peer receives).
* ``aggregator``: what the party that receives the uploads learns. It sees the noise on each
  individual upload when the mechanism reveals individual inputs (plaintext), and the noise on
  the sum when a masked mechanism hides them (a secure sum); central noise, added by the
  aggregator itself after it saw the sum, protects nothing against it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from securefg.errors import InvalidInputError
from securefg.protocol.mechanism import ExchangeCall

#: Key of a party's :class:`PrivacyAccountant` in its private state. The accountant sits there
#: itself (not inside a ``call.state_of`` dict) so that checkpoints, which save every state entry
#: with a ``state_dict``, save the ledger too.
STATE_KEY = "mech/dp"
#: The accountants a report computes by default, by Opacus registry name. PRV is opt-in: it is
#: tighter, but its discretised privacy-loss grid grows with the epsilon, and for the large
#: epsilons of client-level DP over few clients it runs for minutes (sigma 1.0, q 1, 1000 steps:
#: over 40 s) where RDP answers in milliseconds.
ACCOUNTANTS = ("rdp",)


class Unit(str, enum.Enum):
    """What neighbouring datasets differ in."""

    #: One client's whole contribution (client-level DP: clipped updates, embeddings).
    CLIENT = "client"
    #: One training example of a client (example-level DP: DP-SGD on the local model).
    EXAMPLE = "example"


class Mode(str, enum.Enum):
    """Where the Gaussian noise is added."""

    CENTRAL = "central"
    DISTRIBUTED = "distributed"
    LOCAL = "local"
    DPSGD = "dpsgd"


@dataclass(frozen=True)
class Release:
    """One kind of Gaussian release about one subject, repeated ``steps`` times.

    Noise multipliers are in units of the L2 sensitivity (the clip norm).

    Args:
        subject (str): The party whose data the release is about.
        tag (str): The message tag that carried it.
        mode (Mode): Where the noise was added.
        noise_multiplier (float): Noise on the released output.
        upload_noise_multiplier (float): Noise on the subject's own upload.
        sample_rate (float): Poisson sampling rate of the subject per step. (default: ``1.0``)
        steps (int): Number of repetitions. (default: ``1``)
        unit (Unit): Neighbouring relation. (default: ``Unit.CLIENT``)
    """

    subject: str
    tag: str
    mode: Mode
    noise_multiplier: float
    upload_noise_multiplier: float
    sample_rate: float = 1.0
    steps: int = 1
    unit: Unit = Unit.CLIENT

    def __post_init__(self) -> None:
        problems = []
        for name in ("noise_multiplier", "upload_noise_multiplier"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                problems.append(f"{name} must be finite and >= 0, got {value}")
        if not 0 < self.sample_rate <= 1:
            problems.append(f"sample_rate must be in (0, 1], got {self.sample_rate}")
        if self.steps < 1:
            problems.append(f"steps must be >= 1, got {self.steps}")
        if problems:
            raise InvalidInputError(f"invalid DP release on {self.tag!r}: " + "; ".join(problems))

    def same_kind(self, other: Release) -> bool:
        """Whether ``other`` is the same release up to its step count."""
        return replace(other, steps=self.steps) == self

    def sigma(self, view: str, *, inputs_hidden: bool) -> float:
        """Noise multiplier seen by ``view`` (``"output"`` or ``"aggregator"``)."""
        if view == "output":
            return self.noise_multiplier
        if view != "aggregator":
            raise InvalidInputError(f"unknown view {view!r}; choices: ['aggregator', 'output']")
        if not inputs_hidden:
            return self.upload_noise_multiplier
        return 0.0 if self.mode is Mode.CENTRAL else self.noise_multiplier

    def to_json(self) -> dict[str, Any]:
        """Plain data (enums by value), as stored in checkpoints and reports."""
        d = asdict(self)
        d["mode"], d["unit"] = self.mode.value, self.unit.value
        return d


class PrivacyAccountant:
    """Records DP releases per subject and reports (epsilon, delta) with Opacus' accountants.

    Shaped like Opacus' ``IAccountant``: ``record`` plays ``step`` (identical releases are
    merged into one entry with a step count, as Opacus' ``history`` does), and
    ``state_dict`` / ``load_state_dict`` round-trip through plain data for checkpoints.

    Example:
        >>> acc = PrivacyAccountant()
        >>> for _ in range(2250):
        ...     acc.record(Release("client/0", "t", Mode.CENTRAL, 1.5, 0.0, sample_rate=0.04))
        >>> round(acc.epsilon("client/0", delta=1e-5), 4)
        7.3291
    """

    def __init__(self) -> None:
        self._releases: list[Release] = []

    def record(self, release: Release) -> None:
        """Add one release, merged into an earlier one of the same kind (composition commutes)."""
        for i, earlier in enumerate(self._releases):
            if earlier.same_kind(release):
                self._releases[i] = replace(earlier, steps=earlier.steps + release.steps)
                return
        self._releases.append(release)

    def releases(self, subject: str | None = None, *, unit: Unit | None = None) -> list[Release]:
        """Recorded releases, optionally of one subject and unit."""
        return [
            r
            for r in self._releases
            if (subject is None or r.subject == subject) and (unit is None or r.unit is unit)
        ]

    def subjects(self) -> list[str]:
        """Every party some release is about, sorted."""
        return sorted({r.subject for r in self._releases})

    @classmethod
    def combined(cls, accountants: Iterable[PrivacyAccountant]) -> PrivacyAccountant:
        """One accountant holding every release of ``accountants`` (e.g. all parties')."""
        out = cls()
        for acc in accountants:
            for r in acc._releases:
                out.record(r)
        return out

    def epsilon(
        self,
        subject: str,
        *,
        delta: float,
        accountant: str = "rdp",
        unit: Unit = Unit.CLIENT,
        view: str = "output",
        hidden_tags: Collection[str] = (),
    ) -> float:
        """Epsilon of everything released about ``subject`` (composed over all tags).

        Args:
            subject (str): Party id.
            delta (float): Target delta.
            accountant (str): Opacus registry name, ``"rdp"`` or ``"prv"``. (default: ``"rdp"``)
            unit (Unit): Which neighbouring relation. (default: ``Unit.CLIENT``)
            view (str): ``"output"`` or ``"aggregator"`` (see module docs). (default: ``"output"``)
            hidden_tags (Collection[str]): Tags whose mechanism hides individual inputs from
                the aggregator; without it the aggregator view assumes it sees every upload.

        Returns:
            float: ``0.0`` if nothing was released, ``math.inf`` if some release carries no
            noise for this view.
        """
        history = self.history(subject, unit=unit, view=view, hidden_tags=hidden_tags)
        return epsilon_of_history(history, delta=delta, accountant=accountant)

    def history(
        self,
        subject: str,
        *,
        unit: Unit = Unit.CLIENT,
        view: str = "output",
        hidden_tags: Collection[str] = (),
    ) -> tuple[tuple[float, float, int], ...]:
        """Opacus-style history ``(noise_multiplier, sample_rate, steps)`` of one subject and view."""
        return tuple(
            (r.sigma(view, inputs_hidden=r.tag in hidden_tags), r.sample_rate, r.steps)
            for r in self.releases(subject, unit=unit)
        )

    def report(
        self,
        *,
        delta: float,
        hidden_tags: Collection[str] = (),
        accountants: tuple[str, ...] = ACCOUNTANTS,
    ) -> dict[str, Any]:
        """Per-subject epsilons for every unit and view, as JSON-ready data.

        ``None`` stands for an unbounded epsilon (a view with no noise at all).
        """
        memo: dict[tuple[Any, ...], float] = {}

        def eps(history: tuple[tuple[float, float, int], ...], name: str) -> float | None:
            key = (history, name)
            if key not in memo:
                memo[key] = epsilon_of_history(history, delta=delta, accountant=name)
            value = memo[key]
            return None if math.isinf(value) else value

        subjects: dict[str, Any] = {}
        for subject in self.subjects():
            per_unit: dict[str, Any] = {}
            for unit in Unit:
                rels = self.releases(subject, unit=unit)
                if not rels:
                    continue
                views = {}
                for view in ("output", "aggregator"):
                    history = self.history(subject, unit=unit, view=view, hidden_tags=hidden_tags)
                    views[view] = {name: eps(history, name) for name in accountants}
                per_unit[unit.value] = {
                    "epsilon": views["output"],
                    "epsilon_vs_aggregator": views["aggregator"],
                    "releases": [r.to_json() for r in rels],
                }
            subjects[subject] = per_unit
        return {"delta": delta, "accountants": list(accountants), "subjects": subjects}

    def state_dict(self) -> dict[str, Any]:
        """The ledger as plain data (loads with ``torch.load(weights_only=True)`` and JSON)."""
        return {"releases": [r.to_json() for r in self._releases]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the ledger by one saved with :meth:`state_dict`."""
        self._releases = [
            Release(**{**r, "mode": Mode(r["mode"]), "unit": Unit(r["unit"])}) for r in state["releases"]
        ]

    def __len__(self) -> int:
        return sum(r.steps for r in self._releases)

    def __repr__(self) -> str:
        return f"PrivacyAccountant(subjects={len(self.subjects())}, releases={len(self)})"


def epsilon_of_history(
    history: Iterable[tuple[float, float, int]], *, delta: float, accountant: str = "rdp"
) -> float:
    """Epsilon of a composed history of ``(noise_multiplier, sample_rate, steps)``.

    A thin bridge to Opacus: builds the named accountant from its registry and sets its
    ``history``. Returns ``math.inf`` if any entry has no noise and ``0.0`` for no entries.
    """
    if not 0 < delta < 1:
        raise InvalidInputError(f"delta must be in (0, 1), got {delta}")
    history = list(history)
    if not history:
        return 0.0
    if any(sigma == 0 for sigma, _, _ in history):
        return math.inf
    # lazy: importing opacus takes seconds, and the transforms never need it
    from opacus.accountants import create_accountant  # type: ignore[import-untyped]

    acc = create_accountant(mechanism=accountant)
    acc.history = history
    with np.errstate(divide="ignore"):  # Opacus' PRV takes log(1 - q), -inf at q = 1, harmlessly
        return float(acc.get_epsilon(delta=delta))


def accountant_of(call: ExchangeCall, pid: str) -> PrivacyAccountant:
    """The :class:`PrivacyAccountant` in ``pid``'s private state (created on first use)."""
    acc = call.parties[pid].state.setdefault(STATE_KEY, PrivacyAccountant())
    if not isinstance(acc, PrivacyAccountant):
        raise InvalidInputError(f"{pid}'s DP state holds {type(acc).__name__}, not a PrivacyAccountant")
    return acc

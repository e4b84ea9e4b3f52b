r"""The ``subgroup_robust`` mechanism: one secure sum per public subgroup, then a robust rule.

A masked sum hides every input, so the server cannot run a median over clients. It can over
*subgroups*: the clients are split, per call, into public subgroups of at least ``k``
(:mod:`~securefg.protocol.robust.subgroups`, drawn from the run seed, tag and round), each subgroup's inputs are summed by the
``inner`` mechanism (``secure_sum`` under the protected stacks), and the server combines the
subgroup means :math:`m_g = S_g / d_g` (``d_g``: the subgroup's weight total, or its survivor
count for a plain sum) with a robust rule (:mod:`~securefg.protocol.robust.rules`): each
:math:`m_g` is first scaled to at most ``norm_factor`` times the median norm, then the
coordinate median, trimmed mean or weighted mean of the bounded rows is taken. One malicious
client poisons at most one of ``G = n // k`` rows.

**What the server learns** beyond a single sum: every subgroup's sum (and weight total), the
subgroups' membership (public) and survivors. A subgroup of ``k`` clients hides each member's
input among ``k``; ``k - 1`` colluding members plus the server recover the last one.

The result handed back is ``robust_mean * sum_g d_g`` with the count tail (side inputs and the
weight) summed, so the exchange's division by the weight total yields the robust mean
(``returns_sum = False``: methods that need an exact sum refuse this mechanism).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from securefg.errors import ConfigError
from securefg.federation.envelope import Form
from securefg.protocol.guarantees import Voided
from securefg.protocol.mechanism import (
    ExchangeCall,
    ExchangeKind,
    Mechanism,
    SumOutcome,
    mechanism_class,
    register_mechanism,
)
from securefg.protocol.robust.rules import RULES, robust_mean
from securefg.protocol.robust.subgroups import check_sizes, grouping_seed, partition
from securefg.protocol.shared_result import share_sum

NAME = "subgroup_robust"


@dataclass(frozen=True)
class SubgroupRelease:
    """What the server learned from one call: each subgroup's members, survivors and sum."""

    tag: str
    round: int
    groups: tuple[tuple[str, ...], ...]
    contributors: tuple[tuple[str, ...], ...]
    sums: tuple[torch.Tensor, ...]
    count_tail: int
    weighted: bool


@register_mechanism
class SubgroupRobust(Mechanism):
    """Secure sums over public subgroups of ``>= k`` clients, combined by a robust rule.

    Args:
        inner (str): Mechanism summing each subgroup; must return exact sums. (default: ``"secure_sum"``)
        inner_params (dict): Its parameters, as in its own binding. (default: ``{}``)
        rule (str): ``"median"``, ``"trimmed"`` or ``"norm"``. (default: ``"median"``)
        k (int): Smallest subgroup; ``>= 2``. (default: ``3``)
        trim (float): Rows cut per end for ``"trimmed"`` (share, rounded up). (default: ``0.2``)
        norm_factor (float): Subgroup means are scaled to at most this times their median norm;
            ``0`` disables the bound. (default: ``1.0``)

    Raises:
        SubgroupTooSmallError: Fewer than ``k`` clients, or a subgroup whose survivors are fewer
            than ``k`` (the call is aborted; the inner mechanism's own threshold should be ``>= k``).
    """

    name = NAME
    exchanges = frozenset({ExchangeKind.AGGREGATE, ExchangeKind.SHARED_SUM})
    returns_sum = False
    defaults: ClassVar[Mapping[str, Any]] = {"inner": "secure_sum", "inner_params": {}, "rule": "median", "k": 3,
                                             "trim": 0.2, "norm_factor": 1.0}
    protects = ("each input among its subgroup of >= k: the server learns every subgroup's sum (not one total) "
                "and combines them robustly")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.inner: Mechanism = mechanism_class(str(self.params["inner"]))(**dict(self.params["inner_params"]))

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        problems = super().validate_params(params)
        p = {**cls.defaults, **params}
        if p["rule"] not in RULES:
            problems.append(f"rule must be one of {list(RULES)}, got {p['rule']!r}")
        k = p["k"]
        if not isinstance(k, int) or isinstance(k, bool) or k < 2:
            problems.append(f"k must be an integer >= 2 (k = 1 would show the server single updates), got {k!r}")
        trim = p["trim"]
        if not isinstance(trim, (int, float)) or isinstance(trim, bool) or not 0 <= trim < 0.5:
            problems.append(f"trim must be a number in [0, 0.5), got {trim!r}")
        nf = p["norm_factor"]
        if not isinstance(nf, (int, float)) or isinstance(nf, bool) or nf < 0:
            problems.append(f"norm_factor must be a number >= 0, got {nf!r}")
        if not isinstance(p["inner_params"], Mapping):
            problems.append("inner_params must be a table")
            return problems
        try:
            icls = mechanism_class(str(p["inner"]))
        except ConfigError as exc:
            return [*problems, f"inner: {exc}"]
        if ExchangeKind.AGGREGATE not in icls.exchanges or not icls.returns_sum or icls.name == NAME:
            problems.append(f"inner mechanism {icls.name!r} must carry 'aggregate' and return an exact sum")
        problems += [f"inner_params: {q}" for q in icls.validate_params(p["inner_params"])]
        return problems

    @classmethod
    def voided_guarantees(cls, params: Mapping[str, Any]) -> list[Voided]:
        """Those of the inner mechanism's parameters: each subgroup is one of its sums."""
        p = {**cls.defaults, **params}
        return mechanism_class(str(p["inner"])).voided_guarantees(dict(p["inner_params"]))

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        k = int(self.params["k"])
        run_seed = call.rng.initial_seed() if call.rng is not None else 0  # public: the run's seed, not consumed
        groups = partition(inputs, k=k, seed=grouping_seed(str(run_seed), call.tag, call.round))
        inner_call = replace(call, params=self.inner.params)
        sums, survivors = [], []
        for g in groups:
            out = self.inner.run_aggregate(inner_call, {pid: inputs[pid] for pid in g})
            survivors.append(tuple(out.contributors))
            sums.append(out.total.detach().to(torch.float64).cpu())
        check_sizes(survivors, k=k)
        release = SubgroupRelease(call.tag, call.round, groups, tuple(survivors), tuple(sums), call.count_tail,
                                  call.weighted)
        call.state_of(call.server, NAME).setdefault("released", {})[(call.tag, call.round)] = release
        return SumOutcome(self.combine(release), tuple(sorted(p for s in survivors for p in s)))

    def run_shared_sum(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> dict[str, SumOutcome]:
        """The robust aggregate, sent to every client (``Form.AGGREGATE``). The rule runs at the
        server, so the server reads each subgroup sum and the result: a tag that was server-blind
        (``blind_sum``) gives that up when the robust option is on (:func:`.options.robust_stack`
        then sums its subgroups with ``secure_sum``)."""
        return share_sum(call, inputs, self.run_aggregate(call, inputs), form=Form.AGGREGATE)

    def combine(self, release: SubgroupRelease) -> torch.Tensor:
        """``robust_mean * sum_g d_g`` over the values, then the summed count tail."""
        s = torch.stack(release.sums)
        tail = release.count_tail
        values, counts = (s[:, : s.shape[1] - tail], s[:, s.shape[1] - tail :]) if tail else (s, s[:, :0])
        if release.weighted:
            d = counts[:, -1].clone()
        else:
            d = torch.tensor([float(len(c)) for c in release.contributors], dtype=torch.float64)
        if bool((d <= 0).any()):
            d = torch.tensor([float(len(c)) for c in release.contributors], dtype=torch.float64)
        means = values / d.unsqueeze(1)
        robust = robust_mean(means, d, rule=str(self.params["rule"]), trim=float(self.params["trim"]),
                             norm_factor=float(self.params["norm_factor"]))
        return torch.cat([robust * d.sum(), counts.sum(0)])


__all__ = ["NAME", "SubgroupRelease", "SubgroupRobust"]

"""``plaintext_krum``: the robust rule of ``masked_robust`` and ``ckks_robust`` on clear uploads.

A plaintext stack with ``--option robust=krum`` (the audit's unprotected comparison of a robust
row) needs the same rule on the same statistics, not a CKKS key holder: the server reads every
upload anyway. It computes each upload's count sketch (the same public hash), the Gram matrix of
the sketches divided by the clients' weights, runs multi-Krum
(:func:`~securefg.protocol.robust.gram_rules.gram_coefficients`) and returns the kept uploads'
sum (values scaled by ``n / kept`` for an unweighted sum, tails summed), as the protected
mechanisms do. Nothing is hidden.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.errors import InvalidInputError
from securefg.federation.envelope import Form
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, SumOutcome, register_mechanism
from securefg.protocol.plaintext import upload_vectors
from securefg.protocol.robust.ckks_robust import sketch_of, sum_factor
from securefg.protocol.robust.gram_rules import gram_coefficients, selecting_rule_problems, trim_problems
from securefg.protocol.shared_result import share_sum

NAME = "plaintext_krum"
#: Buckets of the sketch the rule judges (the CKKS mechanisms' slots at the default preset).
SKETCH_WIDTH = 4096


def krum_sum(got: Mapping[str, torch.Tensor], *, count_tail: int, weighted: bool, trim: float,
             width: int = SKETCH_WIDTH, rule: str = "krum", norm_factor: float = 0.0) -> tuple[torch.Tensor, dict[str, float]]:
    """``(sum of the kept inputs, coefficient per client)``: multi-Krum (or the norm filter,
    ``rule="norm_filter"``) on the sketches' Gram matrix.

    Raises:
        InvalidInputError: No input, inputs of different lengths, or NaN/Inf.
    """
    order = sorted(got)
    if not order:
        raise InvalidInputError("a robust sum needs at least one input")
    x = torch.stack([got[p].to(torch.float64).reshape(-1) for p in order])
    if not bool(torch.isfinite(x).all()):
        raise InvalidInputError("a robust sum's inputs hold NaN or Inf")
    values = x[:, : x.shape[1] - count_tail]
    sketches = torch.stack([sketch_of(v, width) for v in values])
    w = x[:, -1] if (count_tail and weighted) else torch.ones(len(order), dtype=torch.float64)
    coeffs = torch.zeros(len(order), dtype=torch.float64)
    live = (w > 0).nonzero().flatten()
    if live.numel():
        s = sketches[live] / w[live].unsqueeze(1)
        coeffs[live] = gram_coefficients(s @ s.T, rule=rule, trim=trim, norm_factor=norm_factor)
    m = sum_factor(coeffs, bool(count_tail and weighted))
    kept = coeffs > 0
    total = torch.cat([(coeffs[kept].unsqueeze(1) * values[kept]).sum(0) * m, x[kept, x.shape[1] - count_tail:].sum(0)])
    return total, {p: float(coeffs[k]) for k, p in enumerate(order)}


@register_mechanism
class PlaintextKrum(Mechanism):
    """Multi-Krum on the clear uploads' sketches (the protected robust mechanisms' rule, unprotected).

    Args:
        rule (str): ``"krum"`` or ``"norm_filter"`` (drop an input above ``norm_factor`` times the
            median norm), as the masked mechanisms judge. (default: ``"krum"``)
        trim (float): Share of inputs multi-Krum drops (at most ``(n - 3) // 2``: Krum's ``n >= 2f + 3``). (default: ``0.2``)
        norm_factor (float): The norm filter's threshold. (default: ``0.0``)
    """

    name = NAME
    returns_sum = False
    exchanges = frozenset({ExchangeKind.AGGREGATE, ExchangeKind.SHARED_SUM})
    defaults: ClassVar[Mapping[str, Any]] = {"rule": "krum", "trim": 0.2, "norm_factor": 0.0}
    protects = "nothing (plaintext); drops the updates multi-Krum flags"
    reveals_individual_inputs = True
    #: The party-program server passes the exchange's count tail and weighting to ``combine_uploads``.
    wants_tail = True

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        p = {**cls.defaults, **params}
        return (super().validate_params(params) + trim_problems(p["trim"])
                + selecting_rule_problems(p["rule"], p["norm_factor"]))

    def combine_uploads(self, got: Mapping[str, torch.Tensor], *, count_tail: int = 0,
                        weighted: bool = False) -> SumOutcome:
        """The kept clear uploads' sum and who is in it."""
        total, coefficients = krum_sum(got, count_tail=count_tail, weighted=weighted, trim=float(self.params["trim"]),
                                       rule=str(self.params["rule"]), norm_factor=float(self.params["norm_factor"]))
        return SumOutcome(total, tuple(sorted(p for p, c in coefficients.items() if c > 0)))

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        return self.combine_uploads(upload_vectors(call, inputs, call.server, "plaintext/upload"),
                                    count_tail=int(call.count_tail), weighted=bool(call.weighted))

    def run_shared_sum(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> dict[str, SumOutcome]:
        """The robust sum, read by the server and sent on to every client."""
        return share_sum(call, inputs, self.run_aggregate(call, inputs), form=Form.AGGREGATE)


__all__ = ["NAME", "SKETCH_WIDTH", "PlaintextKrum", "krum_sum"]

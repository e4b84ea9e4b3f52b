"""Robust aggregation (coordinate median, trimmed mean): declared so stacks are checked.

Robust aggregators need every input on its own, which a masked sum hides by design; the stack
validator reads :attr:`RobustAggregation.needs_individual_inputs` and rejects the combination
when the file is loaded ("robust aggregation over a masked sum is impossible").

Over plaintext the server does receive each input, but not through a
:class:`~securefg.protocol.mechanism.Transform`: the server half of a transform is handed only
the mechanism's *sum*. Computing a median there would mean reading the clients' vectors from
the client half, which runs as each client: one party's object reaching another without an
envelope, which the architecture forbids. A robust aggregator therefore belongs in a
mechanism (one that receives the uploads as envelopes and returns the robust statistic) and
this transform refuses to be built rather than silently average. Such a mechanism exists:
``plaintext_trimmed_mean`` in :mod:`securefg.attacks.defences`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from securefg.errors import ConfigError
from securefg.protocol.mechanism import Transform, register_transform


@register_transform
class RobustAggregation(Transform):
    """Marker for robust aggregation (Yin et al. 2018, https://arxiv.org/abs/1803.01498).

    Args:
        method (str): ``"median"`` or ``"trimmed_mean"``. (default: ``"trimmed_mean"``)
        trim (float): Fraction trimmed at each end for ``"trimmed_mean"``. (default: ``0.1``)

    Raises:
        ConfigError: Always, when built: see the module docstring. Over a masked mechanism the
            stack validator rejects it earlier, when the stack is loaded.
    """

    name = "robust_aggregation"
    defaults: ClassVar[Mapping[str, Any]] = {"method": "trimmed_mean", "trim": 0.1}
    needs_individual_inputs = True

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        raise ConfigError(
            "transform 'robust_aggregation' cannot run as a transform: its server half would see "
            "only the mechanism's sum, not the individual inputs a median or trimmed mean needs. "
            "Bind the tag to a robust-aggregation mechanism instead (e.g. mechanism = "
            "'plaintext_trimmed_mean', registered by securefg.attacks), or use 'clip_norm' to bound "
            "each client's influence (which also works under masked sums)"
        )

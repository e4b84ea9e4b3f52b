"""The noise for a target epsilon: CeFGC's graph-level DP option (``--option dp_epsilon=...``).

A client's package releases three things computed from its training graphs, per generator
slot (one per class held for CeFGC, one for CeFGC*); with ``dp_epsilon`` each carries Gaussian
noise and their composition is accounted per slot with Opacus' RDP accountant:

* the score network, trained by DP-SGD (:func:`~securefg.models.graph_score.dp_training.train_dp_generator`:
  per-graph clipping, ``steps`` Poisson-sampled steps at rate ``q``);
* the node-count histogram (one count per graph, L2 sensitivity 1);
* the node-feature table (:meth:`~securefg.methods.cefgc.node_features.NodeFeatureTable.fit`
  with ``noise_std``: each graph's counts scaled to unit L2 norm, so sensitivity 1).

The two one-shot releases get ``ONE_SHOT_SHARE`` of the epsilon each (their noise alone would
reach that epsilon); DP-SGD's noise multiplier is then the smallest one whose composition with
them stays within the target, found by bisection on the accountant. Slots train on disjoint
graphs (a graph has one class), so a client's epsilon is the largest over its slots (parallel
composition); a CeFGC* table row per class is one release (one graph changes one row).

Neighbouring datasets differ in one training graph of one client (graph-level DP, the unit of
the membership audit). Not covered: which classes a client holds (CeFGC ships a model per
class present) and the class counts that set CeFGC*'s per-class histogram rows' totals beyond
the noise; the public architecture and sampling settings (``tune_sampling`` is refused under DP,
it reads the private graphs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from securefg.errors import ConfigError
from securefg.models.graph_score.dp_training import dp_schedule

#: Fraction of the target epsilon each one-shot release (histogram, feature table) would reach alone.
ONE_SHOT_SHARE = 0.1
#: RDP orders beyond Opacus' defaults (which stop at 63): a one-shot release at a small share of a
#: small epsilon (0.1 of 1) needs orders in the hundreds, else no noise reaches it.
EXTRA_ORDERS = (64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024, 2048)
#: Bisection range and iterations of the noise multipliers.
_LOW, _HIGH, _ITERS = 0.05, 5000.0, 60


@dataclass(frozen=True)
class SlotNoise:
    """The noise of one generator slot and the epsilon it spends.

    Args:
        noise_multiplier (float): DP-SGD noise multiplier (std / clip norm).
        histogram_sigma (float): Noise std on each node-count histogram count.
        table_sigma (float): Noise std on each (unit-norm per graph) feature-table count.
        sample_rate (float): DP-SGD Poisson rate.
        steps (int): DP-SGD steps.
        epsilon (float): RDP epsilon of the three releases together, at ``delta``.
        delta (float): The delta.
    """

    noise_multiplier: float
    histogram_sigma: float
    table_sigma: float
    sample_rate: float
    steps: int
    epsilon: float
    delta: float

    def to_dict(self) -> dict[str, float]:
        """JSON-ready."""
        return {"noise_multiplier": self.noise_multiplier, "histogram_sigma": self.histogram_sigma,
                "table_sigma": self.table_sigma, "sample_rate": self.sample_rate, "steps": self.steps,
                "epsilon": self.epsilon, "delta": self.delta}


def composed_epsilon(*, noise_multiplier: float, histogram_sigma: float, table_sigma: float, sample_rate: float,
                     steps: int, delta: float) -> float:
    """Opacus RDP epsilon of ``steps`` DP-SGD steps plus the two one-shot Gaussian releases."""
    from opacus.accountants import RDPAccountant  # type: ignore[import-untyped]

    acc = RDPAccountant()
    acc.history = [(noise_multiplier, sample_rate, steps), (histogram_sigma, 1.0, 1), (table_sigma, 1.0, 1)]
    return float(acc.get_epsilon(delta, alphas=_orders()))


def _orders() -> list[float]:
    from opacus.accountants import RDPAccountant

    return [*RDPAccountant.DEFAULT_ALPHAS, *EXTRA_ORDERS]


def _one_shot_epsilon(sigma: float, delta: float) -> float:
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.history = [(sigma, 1.0, 1)]
    return float(acc.get_epsilon(delta, alphas=_orders()))


def _bisect(fits: object, low: float = _LOW, high: float = _HIGH) -> float:
    """Smallest sigma in ``[low, high]`` with ``fits(sigma)`` true (``fits`` is monotone)."""
    assert callable(fits)
    if not fits(high):
        raise ConfigError(f"no noise multiplier up to {high} reaches the target epsilon; raise dp_epsilon")
    for _ in range(_ITERS):
        mid = math.sqrt(low * high)
        low, high = (low, mid) if fits(mid) else (mid, high)
    return high


def one_shot_sigma(*, epsilon: float, delta: float) -> float:
    """Noise std of a sensitivity-1 release spending ``ONE_SHOT_SHARE * epsilon`` alone."""
    return _bisect(lambda s: _one_shot_epsilon(s, delta) <= ONE_SHOT_SHARE * epsilon)


def plan_slot_noise(*, epsilon: float, delta: float, num_graphs: int, batch_size: int, epochs: int) -> SlotNoise:
    """The noise of one slot trained on ``num_graphs`` graphs for a target ``(epsilon, delta)``.

    Raises:
        ConfigError: ``epsilon`` or ``delta`` out of range, or unreachable.
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"option dp_epsilon must be finite and > 0 (0 turns DP off), got {epsilon}")
    if not 0 < delta < 1:
        raise ConfigError(f"option dp_delta must be in (0, 1), got {delta}")
    q, steps = dp_schedule(num_graphs=num_graphs, batch_size=batch_size, epochs=epochs)
    one_shot = one_shot_sigma(epsilon=epsilon, delta=delta)
    sgd = _bisect(lambda s: composed_epsilon(noise_multiplier=s, histogram_sigma=one_shot, table_sigma=one_shot,
                                             sample_rate=q, steps=steps, delta=delta) <= epsilon)
    eps = composed_epsilon(noise_multiplier=sgd, histogram_sigma=one_shot, table_sigma=one_shot, sample_rate=q,
                           steps=steps, delta=delta)
    return SlotNoise(sgd, one_shot, one_shot, q, steps, eps, delta)


__all__ = ["ONE_SHOT_SHARE", "SlotNoise", "composed_epsilon", "one_shot_sigma", "plan_slot_noise"]

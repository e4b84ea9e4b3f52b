r"""Edge-level DP by randomized response on node pairs: one noisy bit per pair, released once.

Every pair of nodes is reported as an edge with probability ``keep`` if it is one and ``fake``
if it is not, independently of every other pair. Neighbouring graphs differ in one pair, so the
report is :math:`\varepsilon`-edge-DP (pure, :math:`\delta = 0`) with

.. math::
    \varepsilon = \max\big(\ln(\text{keep}/\text{fake}),\ \ln((1-\text{fake})/(1-\text{keep}))\big),

and anything computed from the reported graph alone (FedStruct's Ā, its NSF gradients, the
trained model) is post-processing: no composition over hops or rounds. The symmetric choice
``keep = e^ε/(1+e^ε)``, ``fake = 1/(1+e^ε)`` keeps almost every edge; on a sparse graph the cost
is the ``fake · #non-edges`` random pairs it adds (Cora at ε = 8: about 1,200 beside 5,278 edges).

Sparse graphs have ~n² non-edges, so the fake pairs are drawn by geometric skipping (the gaps
between successes of a Bernoulli(``fake``) sequence): the work is proportional to the number of
pairs reported, not of pairs considered. The uniform numbers come from the OS CSPRNG unless a
seeded source is passed (for measurements only: a seed makes the noise reproducible).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from securefg.errors import ConfigError, InvalidInputError

#: ``uniform(count)``: ``count`` floats in (0, 1].
UniformSource = Callable[[int], np.ndarray]
_UNIT = 2.0**-53


def csprng_uniform(count: int) -> np.ndarray:
    """``count`` uniforms in (0, 1] from 53-bit words of :func:`os.urandom`."""
    if count <= 0:
        return np.zeros(0, dtype=np.float64)
    bits = np.frombuffer(os.urandom(8 * count), dtype="<u8") >> np.uint64(11)
    return (bits.astype(np.float64) + 1.0) * _UNIT


def seeded_uniform(seed: int) -> UniformSource:
    """A reproducible source (measurements only; deployments use :func:`csprng_uniform`)."""
    gen = np.random.default_rng(seed)
    return lambda count: 1.0 - gen.random(count)


@dataclass(frozen=True)
class EdgeRR:
    """The two reporting probabilities and the epsilon they give.

    Args:
        keep (float): P(reported | edge), in (0, 1).
        fake (float): P(reported | no edge), in (0, keep).
    """

    keep: float
    fake: float

    def __post_init__(self) -> None:
        if not (0.0 < self.fake < self.keep < 1.0):
            raise ConfigError(f"randomized response needs 0 < fake < keep < 1, got keep={self.keep}, fake={self.fake}")

    @property
    def epsilon(self) -> float:
        return max(math.log(self.keep / self.fake), math.log((1.0 - self.fake) / (1.0 - self.keep)))

    @classmethod
    def for_epsilon(cls, epsilon: float, keep: float | None = None) -> EdgeRR:
        """The mechanism at ``epsilon``: symmetric by default; with ``keep``, ``fake = keep·e^-ε``
        (fewer fake pairs, more edges dropped).

        Raises:
            ConfigError: ``epsilon`` not finite and > 0; ``keep`` outside (0, 1) or too close to 1
                for this epsilon (a dropped edge would then be too telling).
        """
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon) or epsilon <= 0:
            raise ConfigError(f"edge DP epsilon must be finite and > 0, got {epsilon!r}")
        if keep is None:
            return cls(keep=1.0 / (1.0 + math.exp(-epsilon)), fake=1.0 / (1.0 + math.exp(epsilon)))
        if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0 < keep < 1:
            raise ConfigError(f"edge DP keep must be in (0, 1), got {keep!r}")
        rr = cls(keep=float(keep), fake=float(keep) * math.exp(-epsilon))
        if rr.epsilon > epsilon * (1 + 1e-9):
            top = 1.0 / (1.0 + math.exp(-epsilon))
            raise ConfigError(f"edge DP keep={keep} gives epsilon {rr.epsilon:.3g} > {epsilon}: keep must be <= {top:.6g}")
        return rr


def bernoulli_positions(total: int, p: float, uniform: UniformSource) -> np.ndarray:
    """Sorted indices in ``[0, total)`` of the successes of ``total`` Bernoulli(``p``) draws."""
    if total <= 0 or p <= 0:
        return np.zeros(0, dtype=np.int64)
    log_q = math.log1p(-p)
    out: list[np.ndarray] = []
    pos = -1
    while True:
        batch = max(64, int(1.2 * p * (total - pos)) + 64)
        gaps = np.floor(np.log(uniform(batch)) / log_q).astype(np.int64) + 1
        steps = pos + np.cumsum(gaps)
        inside = steps[steps < total]
        out.append(inside)
        if inside.size < steps.size:
            break
        pos = int(steps[-1])
    return np.concatenate(out)


def respond(edges: Tensor, shape: tuple[int, int], rr: EdgeRR, uniform: UniformSource, *, upper: bool) -> Tensor:
    """Report the pairs of one block: each true edge with ``rr.keep``, each other pair with ``rr.fake``.

    Args:
        edges (Tensor): ``[2, E]`` true edges in block coordinates (row, column), no duplicates;
            with ``upper`` only pairs ``row < column`` (one per undirected edge).
        shape (tuple[int, int]): Block size ``(rows, columns)``.
        rr (EdgeRR): Reporting probabilities.
        uniform (UniformSource): Where the randomness comes from.
        upper (bool): The block is a graph's own node set (square; candidates are ``row < column``).

    Returns:
        Tensor: ``[2, E']`` reported pairs (same coordinates), sorted.

    Raises:
        InvalidInputError: Edges outside the block, below the diagonal of an ``upper`` block, or repeated.
    """
    rows, cols = shape
    e = edges.long().cpu()
    if e.dim() != 2 or e.size(0) != 2:
        raise InvalidInputError(f"edges must be [2, E], got {tuple(e.shape)}")
    if e.numel() and (int(e[0].min()) < 0 or int(e[0].max()) >= rows or int(e[1].min()) < 0 or int(e[1].max()) >= cols):
        raise InvalidInputError(f"edges fall outside the {rows} x {cols} block")
    if upper and (rows != cols or bool((e[0] >= e[1]).any())):
        raise InvalidInputError("an upper block takes square shapes and pairs (row < column) only")
    lin = (e[0] * cols + e[1]).numpy()
    if np.unique(lin).size != lin.size:
        raise InvalidInputError("edges are repeated; report each pair once")
    kept = lin[uniform(lin.size) <= rr.keep]
    fakes = bernoulli_positions(rows * cols, rr.fake, uniform)
    if upper:
        fakes = fakes[(fakes // cols) < (fakes % cols)]
    fakes = fakes[~np.isin(fakes, lin)]
    out = np.union1d(kept, fakes)
    return torch.from_numpy(np.stack([out // cols, out % cols])).long()


__all__ = ["EdgeRR", "UniformSource", "bernoulli_positions", "csprng_uniform", "respond", "seeded_uniform"]

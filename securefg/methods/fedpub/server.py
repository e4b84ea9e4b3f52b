"""FED-PUB's server half: similarity matrix -> personalised aggregation weights.

Eq. 3 of the paper: ``alpha_ij = exp(tau S_ij) / sum_k exp(tau S_ik)`` over every participating
client, ``j = i`` included. The server then asks the protocol layer for each client's mix
``sum_j alpha_ij theta_j``; it never needs a model in the clear.

**Leakage guard.** Client i knows its own model, so a mix that puts nearly all of its peer mass
on one peer j hands i that peer's model (``theta_j ~ (mix - alpha_ii theta_i) / alpha_ij``). With a
cap ``c < 1``, no peer weight exceeds ``c``: the excess is redistributed over the other entries in
proportion to their weights (own weight included, which is never capped), repeated until every
peer is at or below ``c``. The row still sums to one and keeps the similarity ordering.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from securefg.errors import ConfigError, InvalidInputError


def softmax_weights(similarity: torch.Tensor, tau: float) -> torch.Tensor:
    """Row-wise ``softmax(tau * S)`` (Eq. 3), diagonal included."""
    if similarity.dim() != 2 or similarity.shape[0] != similarity.shape[1]:
        raise InvalidInputError(f"similarity must be a square matrix, got shape {tuple(similarity.shape)}")
    if not torch.isfinite(similarity).all():
        raise InvalidInputError("similarity matrix holds NaN or infinite entries")
    return torch.softmax(tau * similarity.double(), dim=1)


def cap_peer_weights(weights: torch.Tensor, cap: float, *, max_iter: int = 1000) -> torch.Tensor:
    """Each row's off-diagonal entries clipped to ``cap``, the excess spread proportionally.

    Args:
        weights (torch.Tensor): Row-stochastic ``(K, K)`` matrix; row i is client i's mix.
        cap (float): Largest weight any *peer* may have in a row, in ``(0, 1]`` (1 = no cap).

    Returns:
        A row-stochastic matrix whose off-diagonal entries are all ``<= cap``.
    """
    if not 0.0 < cap <= 1.0:
        raise ConfigError(f"max_peer_weight must lie in (0, 1], got {cap!r}")
    out = weights.double().clone()
    k = out.shape[0]
    own = torch.eye(k, dtype=torch.bool)
    for _ in range(max_iter):
        over = (out > cap) & ~own
        if not over.any():
            return out
        excess = torch.where(over, out - cap, torch.zeros_like(out)).sum(dim=1, keepdim=True)
        out = torch.where(over, torch.full_like(out, cap), out)
        free = (~over) & ((out < cap) | own)  # entries that may still grow
        mass = torch.where(free, out, torch.zeros_like(out)).sum(dim=1, keepdim=True)
        share = torch.where(free, out / mass.clamp_min(1e-300), torch.zeros_like(out))
        # a row whose free entries all have zero weight gives its excess to the client itself
        share = torch.where((mass > 0), share, own.double())
        out = out + share * excess
    raise InvalidInputError(f"peer-weight cap {cap} did not converge in {max_iter} steps")  # pragma: no cover


def peer_weight_matrix(similarity: torch.Tensor, *, tau: float, max_peer_weight: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(alpha, raw)``: the capped weights the server uses and the softmax weights before the cap."""
    raw = softmax_weights(similarity, tau)
    return cap_peer_weights(raw, max_peer_weight), raw


def as_coefficients(order: Sequence[str], alpha: torch.Tensor) -> dict[str, dict[str, float]]:
    """``{client i: {client j: alpha_ij}}`` for the exchange's ``personalized_aggregate``."""
    return {a: {b: float(alpha[r, c]) for c, b in enumerate(order)} for r, a in enumerate(order)}


def largest_peer_weight(alpha: torch.Tensor) -> float:
    """The largest off-diagonal entry: the most any client's mix owes to one peer."""
    off = alpha.clone()
    off.fill_diagonal_(0.0)
    return float(off.max()) if off.numel() else 0.0

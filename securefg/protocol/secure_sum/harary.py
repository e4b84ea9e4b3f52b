"""Random permuted Harary graphs and the choice of (degree k, threshold t) for SecAgg+.

Bell et al., "Secure Single-Server Aggregation with (Poly)Logarithmic Overhead", CCS 2020
(https://eprint.iacr.org/2020/704): each client shares its secrets with, and masks against,
only its ``k`` neighbours in a Harary graph H(n, k) whose vertex labels are permuted uniformly
at random by the server. Under a uniform permutation, each client's neighbourhood is a
uniformly random k-subset of the other n - 1 clients, which is what the bounds below use.
"""

from __future__ import annotations

import functools
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from securefg.errors import ConfigError
from securefg.protocol.secure_sum.threshold_bound import min_threshold

SIGMA_DEFAULT = 40
ETA_DEFAULT = 30


def harary_graph(
    ids: Sequence[str], degree: int, *, rng: secrets.SystemRandom | None = None
) -> dict[str, frozenset[str]]:
    """The Harary graph H(n, k) on ``ids`` under a uniformly random relabelling.

    Each vertex of a ring is joined to its ``k / 2`` nearest vertices on each side; ``k >= n - 1``
    gives the complete graph. The permutation comes from ``rng`` (a CSPRNG by default: the
    graph's randomness is part of the security argument).

    Args:
        ids (Sequence[str]): The vertices (client ids).
        degree (int): Degree ``k``: even, or ``>= n - 1`` for the complete graph.
        rng (secrets.SystemRandom, optional): Source of the permutation. (default: a CSPRNG)

    Returns:
        dict[str, frozenset[str]]: Symmetric neighbour sets of exactly ``min(k, n - 1)``
        vertices each (no self loops).

    Raises:
        ConfigError: for an odd degree below ``n - 1`` or a degree below 1.
    """
    n = len(ids)
    if degree < 1 or (degree < n - 1 and degree % 2):
        raise ConfigError(f"Harary degree must be even and >= 2 (or >= n - 1 = {n - 1}), got {degree}")
    order = list(ids)
    (rng or secrets.SystemRandom()).shuffle(order)
    if degree >= n - 1:
        return {v: frozenset(order) - {v} for v in order}
    nbrs: dict[str, set[str]] = {v: set() for v in order}
    for i, v in enumerate(order):
        for d in range(1, degree // 2 + 1):
            w = order[(i + d) % n]
            nbrs[v].add(w)
            nbrs[w].add(v)
    return {v: frozenset(s) for v, s in nbrs.items()}


def effective_degree(degree: int, n: int) -> int:
    """``degree`` made valid for ``n`` clients: capped at ``n - 1``, rounded up to even below it."""
    if degree >= n - 1:
        return n - 1
    return degree + (degree % 2)


def _hypergeom_sf(at_least: int, population: int, marked: int, draws: int) -> float:
    """P[X >= at_least] for X ~ Hypergeometric(population, marked, draws), exactly."""
    total = math.comb(population, draws)
    hi = min(marked, draws)
    return sum(math.comb(marked, x) * math.comb(population - marked, draws - x) for x in range(max(at_least, 0), hi + 1)) / total


@dataclass(frozen=True)
class GraphParameters:
    """A (k, t) choice and the failure probabilities it guarantees.

    Attributes:
        degree (int): Neighbours per client ``k``.
        threshold (int): Shares needed to reconstruct ``t`` (``(1/2 + gamma) k < t <= k`` unless no
            ``k`` qualifies).
        privacy_failure (float): Upper bound on P[the adversary holds >= t shares of some honest
            client's secrets] (union bound over clients).
        reliability_failure (float): Upper bound on P[some client keeps fewer than t live
            neighbours] (union bound over clients).
    """

    degree: int
    threshold: int
    privacy_failure: float
    reliability_failure: float


@functools.lru_cache(maxsize=256)
def choose_parameters(
    n: int,
    *,
    dropout_rate: float = 0.1,
    adversarial_rate: float = 0.1,
    sigma: int = SIGMA_DEFAULT,
    eta: int = ETA_DEFAULT,
) -> GraphParameters:
    r"""The smallest degree ``k`` (and its threshold ``t``) meeting the stated guarantees.

    Model: at most :math:`C = \lfloor \gamma n \rfloor` clients collude with the server and at
    most :math:`D = \lceil \delta n \rceil` clients drop out during the round; both sets are fixed
    independently of the server's random permutation. A client's neighbourhood is then a
    uniformly random k-subset of the other ``n - 1``, so the number of colluding (dropped)
    neighbours is hypergeometric. We pick the smallest ``k`` with a ``t`` such that

    * ``t > (1/2 + gamma) k`` (:func:`~.threshold_bound.min_threshold`): a server that lies about
      who dropped cannot collect both kinds of shares of one client, even with colluding
      neighbours (:mod:`~securefg.protocol.secure_sum.threshold_bound`);
    * privacy: :math:`n \cdot P[\#\text{colluding neighbours} \ge t] \le 2^{-\sigma}`;
    * reliability: :math:`n \cdot P[\#\text{dropped neighbours} > k - t] \le 2^{-\eta}`.

    ``k`` is even below ``n - 1`` (the Harary construction). If no ``k < n - 1`` qualifies, the
    complete graph ``k = n - 1`` is returned with the smallest ``t`` from the bound (capped at
    ``k``) meeting privacy; the returned failure probabilities then say what holds.

    Args:
        n (int): Number of clients (>= 2).
        dropout_rate (float): Fraction ``delta`` of clients that may drop. (default: ``0.1``)
        adversarial_rate (float): Fraction ``gamma`` colluding with the server. (default: ``0.1``)
        sigma (int): Privacy parameter. (default: ``40``)
        eta (int): Reliability parameter. (default: ``30``)

    Raises:
        ConfigError: for ``n < 2`` or rates outside [0, 1).
    """
    if n < 2:
        raise ConfigError(f"a secure sum needs at least 2 clients, got {n}")
    if not (0 <= dropout_rate < 1 and 0 <= adversarial_rate < 1):
        raise ConfigError("dropout_rate and adversarial_rate must be in [0, 1)")
    colluders = math.floor(adversarial_rate * n)
    dropped = min(math.ceil(dropout_rate * n), n - 1)
    others = n - 1

    def privacy(k: int, t: int) -> float:
        return min(1.0, n * _hypergeom_sf(t, others, min(colluders, others), k))

    def reliability(k: int, t: int) -> float:
        return min(1.0, n * _hypergeom_sf(k - t + 1, others, dropped, k))

    for k in [*range(2, others, 2), others]:
        low = min_threshold(k, adversarial_rate)
        t = next((t for t in range(low, k + 1) if privacy(k, t) <= 2.0**-sigma), None)
        if t is not None and reliability(k, t) <= 2.0**-eta:
            return GraphParameters(k, t, privacy(k, t), reliability(k, t))
    k = others
    t = next((t for t in range(min(min_threshold(k, adversarial_rate), k), k + 1) if privacy(k, t) <= 2.0**-sigma), k)
    return GraphParameters(k, t, privacy(k, t), reliability(k, t))


def resolve_threshold(threshold: float | None, degree: int, default: int) -> int:
    """A threshold given as a count (int) or a fraction of ``degree`` (float in (0, 1]).

    A count larger than ``degree`` is kept: such a round cannot run and aborts with
    :class:`~securefg.errors.TooFewSurvivorsError`.
    """
    if threshold is None:
        return default
    if isinstance(threshold, bool):
        raise ConfigError("threshold must be a count or a fraction, not a boolean")
    if isinstance(threshold, int):
        if threshold < 1:
            raise ConfigError(f"a threshold count must be >= 1, got {threshold}")
        return threshold
    if not 0 < threshold <= 1:
        raise ConfigError(f"a fractional threshold must be in (0, 1], got {threshold}")
    return max(1, math.ceil(threshold * degree))

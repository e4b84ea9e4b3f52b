r"""Privacy amplification by shuffling: the closed-form bound of Feldman, McMillan and Talwar.

"Hiding Among the Clones: A Simple and Nearly Optimal Analysis of Privacy Amplification by
Shuffling", FOCS 2021 (https://arxiv.org/abs/2012.12803). If each of :math:`n` reports comes
from an :math:`\varepsilon_0`-LDP randomizer and a party that is not the analyst shuffles them,
the analyst's view is :math:`(\varepsilon, \delta)`-DP with :math:`\varepsilon` below.

It applies to **pure** :math:`\varepsilon_0`-LDP randomizers (randomized response, the Laplace
mechanism on bounded inputs). The Gaussian mechanism is not pure-DP for any finite
:math:`\varepsilon_0`, so ``dp_gaussian``'s local releases are *not* fed through this bound; a
Gaussian-specific shuffle analysis would be a numerical one, not this closed form.
"""

from __future__ import annotations

import math

from securefg.errors import InvalidInputError

VARIANTS = ("reference", "theorem")


def shuffle_amplification(epsilon0: float, *, n: int, delta: float, variant: str = "reference") -> float:
    r"""Central epsilon of :math:`n` shuffled :math:`\varepsilon_0`-LDP reports.

    With :math:`a = 8\sqrt{e^{\varepsilon_0}\log(4/\delta)}/\sqrt{n}` and
    :math:`c = 8e^{\varepsilon_0}/n`:

    * ``"theorem"``, Theorem 3.1 as printed in the FOCS version:

      .. math::
          \varepsilon = \log\left(1 + \frac{e^{\varepsilon_0} - 1}{e^{\varepsilon_0} + 1}(a + c)\right)

    * ``"reference"``, the closed form the authors compute in their released analysis code
      (``closedformanalysis`` in apple/ml-shuffling-amplification), which replaces the factor
      by :math:`(1 - e^{-\varepsilon_0}) / (1 + e^{-(\varepsilon_0 + \hat\varepsilon)})` with
      :math:`\hat\varepsilon = \log(1 + a + c)`. Its factor is never smaller, so it is the
      more conservative of the two, and it is the one that reproduces the published values
      for :math:`\delta = 10^{-6}`, :math:`\varepsilon_0 = 1`: about 0.65 at
      :math:`n = 10^3` and 0.23 at :math:`n = 10^4` (``"theorem"`` gives 0.566 and 0.214).

    Both hold for :math:`\varepsilon_0 \le \log(n / (16 \log(4/\delta)))`; this is the condition
    of the reference code, slightly stricter than the paper's :math:`\log(2/\delta)`.

    Args:
        epsilon0 (float): Local epsilon of each report (> 0).
        n (int): Number of shuffled reports (one per client).
        delta (float): Target delta of the shuffled output, in (0, 1).
        variant (str): ``"reference"`` or ``"theorem"``. (default: ``"reference"``)

    Returns:
        float: The central epsilon of the shuffled reports, for the given ``delta``.

    Raises:
        InvalidInputError: If the parameters are outside the bound's range, so the caller falls
            back to the local epsilon knowingly instead of receiving an invalid number.
    """
    if variant not in VARIANTS:
        raise InvalidInputError(f"unknown shuffle bound variant {variant!r}; choices: {list(VARIANTS)}")
    if not (math.isfinite(epsilon0) and epsilon0 > 0):
        raise InvalidInputError(f"epsilon0 must be finite and > 0, got {epsilon0}")
    if not 0 < delta < 1:
        raise InvalidInputError(f"delta must be in (0, 1), got {delta}")
    if n < 1:
        raise InvalidInputError(f"n must be >= 1, got {n}")
    limit = math.log(n / (16 * math.log(4 / delta))) if n > 16 * math.log(4 / delta) else -math.inf
    if epsilon0 > limit:
        raise InvalidInputError(
            f"the shuffle bound of Feldman et al. needs epsilon0 <= log(n / (16 log(4/delta))) = "
            f"{limit:.4g} for n={n}, delta={delta}; got epsilon0={epsilon0}. Use more reports or a "
            "smaller local epsilon, or account the reports at their local epsilon"
        )
    e0 = math.exp(epsilon0)
    spread = 8 * math.sqrt(e0 * math.log(4 / delta) / n) + 8 * e0 / n
    if variant == "theorem":
        factor = (e0 - 1) / (e0 + 1)
    else:
        eps_hat = math.log1p(spread)
        factor = -math.expm1(-epsilon0) / (1 + math.exp(-(epsilon0 + eps_hat)))
    return math.log1p(factor * spread)

r"""The smallest secure-sum threshold an equivocating server cannot beat.

In SecAgg+ (Bell et al., CCS 2020, https://eprint.iacr.org/2020/704; Bonawitz et al., CCS
2017, https://eprint.iacr.org/2017/281) each client Shamir-shares two secrets among its ``k``
neighbours with threshold ``t``: its self-mask seed (opened if it survives) and its masking key
(opened if it dropped). An honest server asks for one or the other. A malicious one
*equivocates*: it tells half of client ``u``'s honest neighbours that ``u`` dropped and the other
half that it survived. With ``c`` of the ``k`` neighbours colluding (they hand over both shares),
it then holds ``t`` shares of each secret, and so ``u``'s unmasked input, as soon as

.. math:: 2 (t - c) \le k - c \iff t \le (k + c) / 2.

Signatures on the survivor list (``signatures = true``) do not help: colluders sign both lists,
and each half of the honest neighbours signs its own. The stack declares the colluding fraction
(``adversarial_rate``, :math:`\gamma`), so we require the SecAgg+ form of the bound,

.. math:: t > (1/2 + \gamma) k,

which defeats the split above for up to :math:`2 \gamma k` colluding neighbours: twice a
random neighbourhood's expected share, a margin for one that happens to hold more colluders.
The default threshold meets it by construction (:func:`~.harary.choose_parameters` and
:meth:`~.settings.Settings.graph` start their search at :func:`min_threshold`); an explicit one
is checked here when the stack is loaded, before the client count is known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from securefg.protocol.guarantees import Voided

PROTECTION = "secure_sum/equivocation_threshold"
_EPS = 1e-9  # (1/2 + gamma) * k lands on an integer up to float rounding; t must then exceed it


def min_threshold(degree: int, adversarial_rate: float) -> int:
    r"""The smallest ``t`` with :math:`t > (1/2 + \gamma) k` (may exceed ``k``: then none is safe).

    Args:
        degree (int): Neighbours per client ``k``.
        adversarial_rate (float): Colluding fraction :math:`\gamma` the stack declares.
    """
    return math.floor((0.5 + adversarial_rate) * degree + _EPS) + 1


def voided(params: Mapping[str, Any]) -> list[Voided]:
    """Why a secure sum's ``threshold`` (with its ``degree`` and ``adversarial_rate``) fails the bound.

    Args:
        params (Mapping[str, Any]): Validated secure-sum parameters, defaults filled in.

    Returns:
        list[Voided]: Empty when every round the settings allow meets the bound.
    """
    gamma = float(params["adversarial_rate"])
    t, k = params["threshold"], params["degree"]
    if gamma >= 0.5:
        return [Voided(PROTECTION, f"adversarial_rate = {gamma} leaves no threshold t <= k above (1/2 + {gamma}) * k; "
                                   "SecAgg+ needs a colluding fraction below 1/2")]
    if t is None:
        return []  # the default threshold starts at min_threshold
    if isinstance(t, float):
        if t > 0.5 + gamma + _EPS:
            return []
        return [Voided(PROTECTION, f"threshold = {t} (a fraction of the degree) must exceed 1/2 + adversarial_rate "
                                   f"= {0.5 + gamma:g}, e.g. threshold = {min(1.0, round(0.5 + gamma + 0.1, 2))}")]
    if k is None:
        return [Voided(PROTECTION, f"threshold = {t} as a count cannot be checked against the degree, which depends "
                                   "on the client count; give it as a fraction of the degree (e.g. threshold = "
                                   f"{min(1.0, round(0.5 + gamma + 0.1, 2))}) or pin 'degree' too")]
    k_max = k + k % 2  # the Harary degree actually used is k rounded up to even (or n - 1 <= k)
    need = min_threshold(k_max, gamma)
    if t >= need:
        return []
    return [Voided(PROTECTION, f"threshold = {t} with degree = {k} must be at least {need} "
                               f"(> (1/2 + adversarial_rate) * {k_max})")]


__all__ = ["PROTECTION", "min_threshold", "voided"]

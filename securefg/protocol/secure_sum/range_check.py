r"""The secure sum's optional range check (``norm_bound``): what bounds a malicious client's input.

A masked input is uniform in the ring to the aggregator, so nothing it sees bounds one client's
input: a malicious client can send any ring vector and so shift the sum by anything, or wrap it
around the ring. ``norm_bound = B`` (a stack parameter, off by default) declares a per-client
bound on the L2 norm of the vector the mechanism sums (after the exchange's weighting, with the
appended weight and side counts), and enforces it where it can be:

* **each client** refuses its own input beyond ``B`` before masking it
  (:class:`~securefg.errors.InvalidInputError`; bring inputs under it with a clipping transform
  such as ``clip_norm``), so an honest client never sends more;
* **the aggregator** (or, under ``blind_sum``, each client after unblinding) refuses a sum that
  ``n_u`` contributors within the bound cannot produce (:class:`~securefg.errors.ImplausibleSumError`):
  :math:`\|s\|_2 > n_u B` or :math:`|s_i| > n_u \min(B, c)`, plus the quantization error.

**What it catches.** A wrap, or a gross shift: a malicious client that adds a large or random
ring vector moves the sum outside the ball of radius :math:`n_u B` unless it aims inside it.
**What it cannot.** A malicious client may still send any vector of norm up to ``B`` (a valid
input), and, as the check sees only the sum, a larger aimed shift that keeps the total inside
the ball (e.g. cancelling the honest clients' inputs) passes. The bound bounds influence; it
does not verify inputs.

**Why no proof** (:attr:`RangeCheck.PROOF` is never active). Proving :math:`\|x_u\| \le B` for a
masked :math:`y_u` needs a commitment to :math:`x_u` linked to the masks and a zero-knowledge
range or norm proof per client per round (Bulletproofs over each coordinate, or the
lattice/SNARK proofs of ACORN (Bell et al. 2023) and RoFL): milliseconds per coordinate, so
minutes per round for a model of 10^5 parameters, a change of the masks' ring to a prime-order
group, and no well-kept Python library to build on (the house rule forbids hand-written crypto).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from securefg.errors import ImplausibleSumError, InvalidInputError


class RangeCheck(str, enum.Enum):
    """Which range check bounds a malicious client's contribution to a secure sum."""

    NONE = "none"
    """Nothing: a malicious client can shift or wrap the sum by any amount."""
    NORM_BOUND = "norm_bound"
    """``norm_bound``: clients refuse their own inputs beyond it; the aggregator checks the sum."""
    PROOF = "proof"
    """A zero-knowledge proof per input: not implemented (see the module docstring)."""


def range_check_of(params: Mapping[str, Any]) -> RangeCheck:
    """The range check a secure-sum binding's parameters turn on."""
    return RangeCheck.NORM_BOUND if params.get("norm_bound") is not None else RangeCheck.NONE


def validate(params: Mapping[str, Any]) -> list[str]:
    """One message if ``norm_bound`` is given but not a finite number > 0."""
    b = params.get("norm_bound")
    if b is None:
        return []
    if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b) or b <= 0:
        return [f"'norm_bound' must be a finite number > 0 (the largest L2 norm of one client's input), got {b!r}"]
    return []


def check_input(vector: np.ndarray, *, bound: float | None, pid: str, tag: str) -> None:
    """As a client: refuse this client's own input beyond the declared norm bound.

    Raises:
        InvalidInputError: ``||vector||_2 > bound``.
    """
    if bound is None:
        return
    norm = float(np.linalg.norm(vector))
    if not norm <= bound:
        raise InvalidInputError(
            f"{tag!r}: the input of {pid} has L2 norm {norm:.6g}, beyond the secure sum's norm_bound {bound:.6g}; "
            "clip it first (e.g. a clip_norm transform; the exchange multiplies by the weight and appends it) "
            "or raise norm_bound in the stack"
        )


def check_sum(total: np.ndarray, *, contributors: int, bound: float | None, clip: float, error: float,
              tag: str) -> None:
    """As the receiver of a sum: refuse one that ``contributors`` inputs within the bound cannot make.

    Args:
        total (np.ndarray): The decoded (float) sum.
        contributors (int): How many inputs it holds.
        bound (float, optional): The declared per-client L2 bound (``None``: no check).
        clip (float): The per-element clip of the ring encoding.
        error (float): The worst quantization error per element of the sum.
        tag (str): The call's tag, for the message.

    Raises:
        ImplausibleSumError: The sum's norm or an element is out of range.
    """
    if bound is None:
        return
    peak_limit = contributors * min(bound, clip) + error
    norm_limit = contributors * bound + error * math.sqrt(max(total.size, 1))
    peak = float(np.abs(total).max()) if total.size else 0.0
    norm = float(np.linalg.norm(total))
    if not (peak <= peak_limit and norm <= norm_limit):
        raise ImplausibleSumError(
            f"{tag!r}: the unmasked sum of {contributors} inputs has L2 norm {norm:.6g} and peak {peak:.6g}, beyond "
            f"{contributors} x norm_bound {bound:.6g}: a client shifted or wrapped it (a malicious input), or the "
            "bound is misdeclared; the sum is refused"
        )

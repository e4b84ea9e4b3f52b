"""The Gaussian mechanism as a protocol-stack transform: clip each input, add calibrated noise.

Stack use::

    [tags."fedavg/update"]
    mechanism = "secure_sum"
    transforms = [{ name = "dp_gaussian", mode = "distributed", noise_multiplier = 1.0, clip = 1.0 }]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch

from securefg.errors import ConfigError, MechanismError
from securefg.federation.party import is_client
from securefg.protocol.dp.accountant import Mode, Release, accountant_of
from securefg.protocol.dp.noise import clip_to_norm, gaussian_noise
from securefg.protocol.guarantees import Voided
from securefg.protocol.mechanism import ExchangeCall, Transform, register_transform


@register_transform
class DPGaussian(Transform):
    r"""Clip every input to L2 norm :math:`C` and add Gaussian noise of std :math:`\sigma C`.

    The Gaussian mechanism (Dwork and Roth 2014, App. A; https://doi.org/10.1561/0400000042)
    with client-level sensitivity :math:`C`: each client's vector (already multiplied by its
    public weight by the exchange) is clipped, so adding or removing one client moves the sum
    by at most :math:`C`. Three placements of the noise:

    * ``central``: clients clip; the *receiver* adds :math:`\mathcal{N}(0, \sigma^2 C^2)` once
      to the sum. It protects the released value against everyone who sees it **except the
      receiver**, which saw the sum before the noise (trusted-curator DP).
    * ``distributed``: each client adds :math:`\mathcal{N}(0, \sigma^2 C^2 / n)` with
      :math:`n` = ``expected_clients``, so a sum over all :math:`n` carries the central noise.
      Composed with a masked sum (``secure_sum``, CKKS) the aggregator sees only that noisy sum.
      Caveats, all reflected in the accountant: if only :math:`m < n` clients survive, the sum
      carries :math:`\sigma \sqrt{m/n}`; ``colluding`` clients know their own shares and remove
      them, leaving :math:`\sigma \sqrt{(m - t)/n}` (honest-majority assumption); over a
      mechanism that reveals individual inputs (plaintext) the aggregator sees each upload
      with only :math:`\sigma/\sqrt{n}`.
    * ``local``: each client adds the full :math:`\mathcal{N}(0, \sigma^2 C^2)` itself (local
      DP): it protects against every other party whatever the mechanism. This is the mode
      for ``similarity`` tags (noise on the embeddings :math:`h_k`), whose exchange has no
      server-side step.

    Each release is recorded in a :class:`~securefg.protocol.dp.accountant.PrivacyAccountant`:
    ``local`` ones by the client in its own state, ``central`` and ``distributed`` ones by the
    server step in the server's state (also for ``peer_sum``, whose receiver is a client:
    ``Transform.server`` is not told who the receiver is).

    ``central`` and ``distributed`` need the exchange's server step, which only ``aggregate``
    and ``peer_sum`` run; on another exchange the transform raises at the next call rather than
    release un-noised values again.

    Args:
        mode (str): ``"central"``, ``"distributed"`` or ``"local"``. (default: ``"central"``)
        noise_multiplier (float): :math:`\sigma`, noise std in units of ``clip``. Required.
        clip (float): :math:`C`, the L2 norm bound of each input. Required.
        sample_rate (float): Poisson rate at which clients take part in a call, for the
            accountant of ``central``/``distributed`` releases; anything below ``1.0`` is a claim
            that client sampling is Poisson and secret. No exchange samples clients, so a stack
            refuses a rate below 1 on ``central``/``distributed`` noise unless marked ``unsafe``
            (:mod:`securefg.protocol.guarantees`). ``local`` releases are accounted at rate
            ``1.0`` (the receiver knows who sent). (default: ``1.0``)
        expected_clients (int): :math:`n` for ``distributed``; ``0`` means every client of the
            federation. (default: ``0``)
        colluding (int): Clients assumed to collude with the aggregator in ``distributed``
            mode; the accountant removes their noise shares. (default: ``0``)
        secure_rng (bool): Draw noise from the OS CSPRNG; ``false`` uses the exchange's seeded
            generator, for reproducible tests and simulation only: a stack refuses it unless
            marked ``unsafe``. (default: ``true``)
    """

    name = "dp_gaussian"
    defaults: ClassVar[Mapping[str, Any]] = {
        "mode": Mode.CENTRAL.value,
        "noise_multiplier": None,
        "clip": None,
        "sample_rate": 1.0,
        "expected_clients": 0,
        "colluding": 0,
        "secure_rng": True,
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        problems = []
        modes = [m.value for m in (Mode.CENTRAL, Mode.DISTRIBUTED, Mode.LOCAL)]
        if p["mode"] not in modes:
            problems.append(f"mode {p['mode']!r} is not one of {modes}")
        for key in ("noise_multiplier", "clip"):
            if p[key] is None:
                problems.append(f"{key!r} is required")
            elif not _positive(p[key]):
                problems.append(f"{key!r} must be a finite number > 0, got {p[key]!r}")
        if not (_positive(p["sample_rate"]) and p["sample_rate"] <= 1):
            problems.append(f"'sample_rate' must be in (0, 1], got {p['sample_rate']!r}")
        for key in ("expected_clients", "colluding"):
            if not (isinstance(p[key], int) and not isinstance(p[key], bool) and p[key] >= 0):
                problems.append(f"{key!r} must be an integer >= 0, got {p[key]!r}")
        if not isinstance(p["secure_rng"], bool):
            problems.append(f"'secure_rng' must be true or false, got {p['secure_rng']!r}")
        if problems:
            raise ConfigError(
                f"invalid parameters for transform {self.name!r}:\n" + "\n".join(f"- {x}" for x in problems)
            )
        self.mode = Mode(p["mode"])
        self.sigma = float(p["noise_multiplier"])
        self.clip = float(p["clip"])
        self._awaiting_server: ExchangeCall | None = None

    @classmethod
    def voided_guarantees(cls, params: Mapping[str, Any]) -> list[Voided]:
        """Seeded noise (``secure_rng = false``) and a sampling discount without sampling.

        No exchange samples clients: every client takes part in every call, so the accountant
        must see rate 1. Noise from the run's seeded generator is reproducible by whoever knows
        the seed (it is in result.json), who subtracts it: the epsilon would be reported for
        noise that protects nothing.
        """
        p = {**cls.defaults, **params}
        out = []
        if p["secure_rng"] is False:
            out.append(Voided("dp_gaussian/secure_noise", "secure_rng = false draws the DP noise from the run's seeded "
                              "generator; remove it (the OS CSPRNG is the default)"))
        rate = p["sample_rate"]
        if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate < 1 and p["mode"] != Mode.LOCAL.value:
            out.append(Voided("dp_gaussian/sampling", f"sample_rate = {rate} discounts epsilon for Poisson client "
                              "sampling, but every client takes part in every call; remove it (rate 1)"))
        return out

    # ------------------------------------------------------------------------- client half
    def client(self, call: ExchangeCall, pid: str, vector: torch.Tensor) -> torch.Tensor:
        """Run as client ``pid``: clip, then add this client's share of the noise."""
        if self._awaiting_server is not None and self._awaiting_server is not call:
            raise MechanismError(
                f"dp_gaussian in {self.mode.value!r} mode on tag {call.tag!r}: the previous call's "
                "server step never ran, so its inputs may have been released without noise. Either "
                "that call failed, or this exchange has no server-side step (only 'aggregate' and "
                "'peer_sum' do); for such exchanges use mode = 'local'"
            )
        clipped = clip_to_norm(vector, self.clip)
        if self.mode is Mode.CENTRAL:
            self._awaiting_server = call
            return clipped
        if self.mode is Mode.DISTRIBUTED:
            self._awaiting_server = call
            std = self.sigma * self.clip / math.sqrt(self._expected(call))
            return clipped + gaussian_noise(clipped.numel(), std=std, generator=self._generator(call))
        noisy = clipped + gaussian_noise(
            clipped.numel(), std=self.sigma * self.clip, generator=self._generator(call)
        )
        # No sampling amplification for local noise: the receiver knows who sent the upload.
        accountant_of(call, pid).record(Release(pid, call.tag, Mode.LOCAL, self.sigma, self.sigma))
        return noisy

    def handed_off(self) -> None:
        """The client's vector left this party. In a party program each party holds its own copy
        of the stack and the server step runs on the server's copy, so a client's copy has no
        server step to wait for (the lockstep check above applies to a shared copy only)."""
        self._awaiting_server = None

    # ------------------------------------------------------------------------- server half
    def server(self, call: ExchangeCall, total: torch.Tensor, contributors: Sequence[str]) -> torch.Tensor:
        """Run as the receiver: add central noise and record what was released about whom."""
        self._awaiting_server = None
        if self.mode is Mode.LOCAL:
            return total
        q = self.params["sample_rate"]
        ledger = accountant_of(call, call.server)
        if self.mode is Mode.CENTRAL:
            for pid in contributors:
                ledger.record(Release(pid, call.tag, Mode.CENTRAL, self.sigma, 0.0, q))
            noise = gaussian_noise(total.numel(), std=self.sigma * self.clip, generator=self._generator(call))
            return total + noise
        n = self._expected(call)
        honest = max(len(contributors) - self.params["colluding"], 0)
        for pid in contributors:
            ledger.record(
                Release(
                    pid,
                    call.tag,
                    Mode.DISTRIBUTED,
                    self.sigma * math.sqrt(honest / n),
                    self.sigma / math.sqrt(n),
                    q,
                )
            )
        return total

    # ---------------------------------------------------------------------------- helpers
    def _expected(self, call: ExchangeCall) -> int:
        n = int(self.params["expected_clients"]) or sum(1 for p in call.parties if is_client(p))
        if n < 1:
            raise ConfigError(f"dp_gaussian on {call.tag!r}: distributed mode needs expected_clients >= 1")
        return n

    def _generator(self, call: ExchangeCall) -> torch.Generator | None:
        if self.params["secure_rng"]:
            return None
        if call.rng is None:
            raise ConfigError(
                f"dp_gaussian on {call.tag!r}: secure_rng = false needs the exchange's seeded "
                "generator (call.rng), and this call has none; set secure_rng = true"
            )
        return call.rng

    def __repr__(self) -> str:
        return f"DPGaussian(mode={self.mode.value!r}, noise_multiplier={self.sigma}, clip={self.clip})"


def _positive(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0

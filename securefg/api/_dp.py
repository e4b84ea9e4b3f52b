"""The ``dp_gaussian`` transform without an exchange: clip and noise on the client, central noise and
accounting on the server, each recorded in a [`PrivacyAccountant`][securefg.api.PrivacyAccountant].

It runs the stack's own transform (``DPGaussian``), so the noise,
its placement and every recorded release are those of a securefg run. Compose it with a sum that
hides inputs ([`SecureSumClient`][securefg.api.SecureSumClient], [`CKKSClient`][securefg.api.CKKSClient]):
the client half runs on the input before it is masked or encrypted, the server half on the sum the server
learns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch

from securefg.api._config import StackLike, failed_protections, from_code, stack_of
from securefg.api._wire import check_pid
from securefg.errors import ConfigError, InvalidInputError
from securefg.federation.party import Party
from securefg.protocol.dp.accountant import STATE_KEY, PrivacyAccountant
from securefg.protocol.dp.gaussian import DPGaussian
from securefg.protocol.guarantees import FailedProtection
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind


class DPGaussianNoise:
    r"""Clip each input to L2 norm ``C`` and add Gaussian noise of std ``\sigma C`` where
    ``mode`` says (the Gaussian mechanism; Dwork and Roth 2014, https://doi.org/10.1561/0400000042).

    * ``"central"``: the client clips; the server adds ``\mathcal{N}(0, \sigma^2 C^2)`` to the
      sum (protects the released sum against everyone but the server).
    * ``"distributed"``: each client adds ``\mathcal{N}(0, \sigma^2 C^2 / n)``, ``n`` =
      ``expected_clients``; under a sum that hides inputs the server sees only the noisy sum.
    * ``"local"``: each client adds the full noise itself (protects against every party).

    Noise comes from the OS CSPRNG. Releases are recorded in the accountant you pass: the client's
    own for ``local``, the server's for ``central`` and ``distributed``.

    Args:
        unsafe (str, optional): Why a setting that voids a protection may run anyway. (default: ``None``)
        **params: The ``dp_gaussian`` parameters: ``mode`` (``"central"``, ``"distributed"`` or
            ``"local"``; default ``"central"``), ``noise_multiplier`` (``\sigma``, in units of
            ``clip``; required), ``clip`` (``C``, the L2 bound of each input; required),
            ``expected_clients`` (``n`` for ``"distributed"``, required >= 1 there), ``colluding``
            (clients assumed to collude with the server, ``"distributed"``; default 0) and
            ``sample_rate`` (a Poisson client-sampling rate claimed to the accountant; below 1 it is
            refused for central and distributed noise unless ``unsafe``; default 1).

    Raises:
        ConfigError: Every invalid parameter at once, or a voided protection without ``unsafe``.
    """

    def __init__(self, *, unsafe: str | None = None, **params: Any) -> None:
        res, stack = from_code("plaintext", ExchangeKind.AGGREGATE, {}, unsafe=unsafe, what="DPGaussianNoise",
                               transforms=({"name": "dp_gaussian", **params},))
        self._init(cast(DPGaussian, res.transforms[0]), failed_protections(res, stack))

    @classmethod
    def from_stack(cls, stack: StackLike, tag: str, *, exchange: str = "aggregate") -> DPGaussianNoise:
        """The ``dp_gaussian`` transform bound on ``tag`` in a protocol stack.

        Raises:
            ConfigError: The tag's binding has no ``dp_gaussian`` transform, or an unknown exchange.
            UnboundTagError: No pattern of the stack binds ``tag``.
        """
        st = stack_of(stack)
        try:
            kind = ExchangeKind(exchange)
        except ValueError:
            raise ConfigError(f"Could not resolve exchange {exchange!r} among choices "
                              f"{sorted(k.value for k in ExchangeKind)}") from None
        res = st.resolve(tag, kind)
        found = [t for t in res.transforms if isinstance(t, DPGaussian)]
        if not found:
            raise ConfigError(f"DPGaussianNoise.from_stack: stack {st.name!r} binds no dp_gaussian transform on {tag!r}")
        self = cls.__new__(cls)
        self._init(found[0], failed_protections(res, st))
        return self

    def _init(self, transform: DPGaussian, failed: tuple[FailedProtection, ...]) -> None:
        if transform.params["secure_rng"] is not True:
            raise ConfigError("DPGaussianNoise draws its noise from the OS CSPRNG; secure_rng = false is not offered")
        if transform.mode.value == "distributed" and int(transform.params["expected_clients"]) < 1:
            raise ConfigError("DPGaussianNoise: distributed mode needs expected_clients >= 1 (the n clients whose "
                              "noise shares add up to the central noise)")
        self._transform = transform
        self.params: dict[str, Any] = dict(transform.params)
        """Every parameter, defaults included."""
        self.failed_protections = failed
        """Protections this config voids and waives with ``unsafe``."""

    @property
    def mode(self) -> str:
        """``"central"``, ``"distributed"`` or ``"local"``."""
        return self._transform.mode.value

    def _call(self, tag: str, pid: str, accountant: PrivacyAccountant | None, server: str) -> ExchangeCall:
        if not isinstance(tag, str) or not tag:
            raise InvalidInputError(f"tag must be a non-empty string, got {tag!r}")
        state: dict[str, Any] = {STATE_KEY: accountant if accountant is not None else PrivacyAccountant()}
        return ExchangeCall(transport=cast(Any, None), parties={pid: Party(pid, state)}, round=0, tag=tag,
                            params={}, server=server)

    def client(self, vector: torch.Tensor, *, pid: str, tag: str,
               accountant: PrivacyAccountant | None = None) -> torch.Tensor:
        """As client ``pid``: its input clipped, with its share of the noise (none for ``"central"``).

        Args:
            vector (torch.Tensor): The 1-D input (a new tensor is returned; this one is unchanged).
            pid (str): The client's id (the subject of a ``"local"`` release).
            tag (str): The message tag (recorded with the release).
            accountant (PrivacyAccountant, optional): Where a ``"local"`` release is recorded.
                (default: none kept)

        Raises:
            InvalidInputError: Not a finite 1-D vector.
        """
        v = torch.as_tensor(vector).detach().to("cpu", torch.float64)
        if v.dim() != 1:
            raise InvalidInputError(f"the input of {pid} must be 1-D, got shape {tuple(v.shape)}")
        out = self._transform.client(self._call(tag, check_pid(pid), accountant, server="server"), pid, v)
        self._transform.handed_off()  # the server half runs on the server's own object
        return out

    def server(self, total: torch.Tensor, *, contributors: Sequence[str], tag: str,
               accountant: PrivacyAccountant, server: str = "server") -> torch.Tensor:
        """As the server: the sum with central noise added (``"central"``; unchanged otherwise), and a
        release recorded about each contributor in ``accountant``.

        Args:
            total (torch.Tensor): The sum the server learned (over ``contributors``).
            contributors (Sequence[str]): The clients in the sum.
            tag (str): The message tag.
            accountant (PrivacyAccountant): The server's accountant.
            server (str): The server's id. (default: ``"server"``)
        """
        t = torch.as_tensor(total).detach().to("cpu", torch.float64)
        return self._transform.server(self._call(tag, check_pid(server), accountant, server=server), t,
                                      list(contributors))

    def __repr__(self) -> str:
        return repr(self._transform).replace("DPGaussian(", "DPGaussianNoise(", 1)

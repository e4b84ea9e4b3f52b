"""securefg's protocols as a library: the public, documented and versioned API.

Every mechanism is a set of *sans-IO* objects, one per role: each method takes the bytes its party
received and returns the bytes it must send. Moving those bytes (sockets, queues, another FL
framework's messages), timing out silent parties, and authenticating the two ends of each link are
the caller's; docs/embedding.md says what each side must keep secret and what happens on dropouts
and bad messages.

* **Secure sum with dropouts** (SecAgg+): [`SecureSumConfig`][securefg.api.SecureSumConfig],
  [`SecureSumClient`][securefg.api.SecureSumClient], [`SecureSumServer`][securefg.api.SecureSumServer],
  [`SecureSumResult`][securefg.api.SecureSumResult].
* **CKKS** aggregate, personalized aggregate and similarity: [`CKKSConfig`][securefg.api.CKKSConfig],
  [`CKKSKeyHolder`][securefg.api.CKKSKeyHolder], [`CKKSClient`][securefg.api.CKKSClient],
  [`CKKSServer`][securefg.api.CKKSServer].
* **Sealed relay and shuffler**: [`RelayConfig`][securefg.api.RelayConfig],
  [`RelayMember`][securefg.api.RelayMember], [`RelayServer`][securefg.api.RelayServer],
  [`RelayShuffler`][securefg.api.RelayShuffler], [`SealingKey`][securefg.api.SealingKey].
* **Differential privacy**: [`DPGaussianNoise`][securefg.api.DPGaussianNoise] (the ``dp_gaussian``
  transform) and [`PrivacyAccountant`][securefg.api.PrivacyAccountant] with
  [`Release`][securefg.api.Release], [`DPMode`][securefg.api.DPMode],
  [`PrivacyUnit`][securefg.api.PrivacyUnit].
* **Configuration**: each config from code or ``from_stack`` ([`ProtocolStack`][securefg.api.ProtocolStack],
  the TOML stack files); [`FailedProtection`][securefg.api.FailedProtection] for settings waived with
  ``unsafe``.
* **Errors**: every error is a [`SecureFGError`][securefg.api.SecureFGError]; the ones these objects raise
  are below, with the reason enums they carry ([`AbortReason`][securefg.api.AbortReason],
  [`ClientDropReason`][securefg.api.ClientDropReason]).

Names not listed in ``__all__`` (including every module whose name starts with an underscore, and
every other ``securefg`` module) are internal and may change without notice.
"""

from securefg._version import __version__
from securefg.api._ckks import CKKSClient, CKKSConfig, CKKSKeyHolder, CKKSServer
from securefg.api._dp import DPGaussianNoise
from securefg.api._relay import RelayConfig, RelayMember, RelayServer, RelayShuffler
from securefg.api._secure_sum import SecureSumClient, SecureSumConfig, SecureSumResult, SecureSumServer
from securefg.errors import (
    AuthenticationError,
    CodecError,
    ConfigError,
    EquivocationError,
    ForgedClaimError,
    ImplausibleSumError,
    InvalidClaimError,
    InvalidInputError,
    KeySubstitutionError,
    MechanismError,
    OverflowRiskError,
    ProtocolError,
    RingTooSmallError,
    SecretKeyError,
    SecureFGError,
    SenderAuthenticationError,
    TooFewSurvivorsError,
    UnboundTagError,
    UnexpectedMessageError,
)
from securefg.protocol.dp.accountant import Mode as DPMode
from securefg.protocol.dp.accountant import PrivacyAccountant, Release
from securefg.protocol.dp.accountant import Unit as PrivacyUnit
from securefg.protocol.guarantees import FailedProtection
from securefg.protocol.relay.sealed_box import SealingKey
from securefg.protocol.secure_sum.constants import AbortReason, ClientDropReason
from securefg.protocol.stack import ProtocolStack

__all__ = [
    "AbortReason",
    "AuthenticationError",
    "CKKSClient",
    "CKKSConfig",
    "CKKSKeyHolder",
    "CKKSServer",
    "ClientDropReason",
    "CodecError",
    "ConfigError",
    "DPGaussianNoise",
    "DPMode",
    "EquivocationError",
    "FailedProtection",
    "ForgedClaimError",
    "ImplausibleSumError",
    "InvalidClaimError",
    "InvalidInputError",
    "KeySubstitutionError",
    "MechanismError",
    "OverflowRiskError",
    "PrivacyAccountant",
    "PrivacyUnit",
    "ProtocolError",
    "ProtocolStack",
    "RelayConfig",
    "RelayMember",
    "RelayServer",
    "RelayShuffler",
    "Release",
    "RingTooSmallError",
    "SealingKey",
    "SecretKeyError",
    "SecureFGError",
    "SecureSumClient",
    "SecureSumConfig",
    "SecureSumResult",
    "SecureSumServer",
    "SenderAuthenticationError",
    "TooFewSurvivorsError",
    "UnboundTagError",
    "UnexpectedMessageError",
    "__version__",
]

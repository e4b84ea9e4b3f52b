"""One exception hierarchy for securefg.

Shaped like Opacus' ``validators/errors.py``: a single root so callers can catch
everything securefg raises, and narrow subclasses that say *what* went wrong and,
where possible, what to do about it.
"""

from __future__ import annotations


class SecureFGError(Exception):
    """Root of every error raised by securefg."""


# --- configuration and input -------------------------------------------------------------
class ConfigError(SecureFGError, ValueError):
    """A configuration file or option is invalid (unknown name, impossible combination)."""


class DatasetError(SecureFGError):
    """A dataset could not be loaded: its files are missing, corrupt or unsafe to read."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """A dataset's raw files are missing and cannot be downloaded (offline)."""


class DatasetFileError(DatasetError, ValueError):
    """A dataset file is truncated or malformed; ``path`` names it so it can be replaced."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class UnsafeDataFileError(DatasetFileError):
    """A dataset file names code or objects outside the reader's allow-list; refused unread.

    E.g. a pickled ``ind.cora.x`` whose stream calls ``os.system``: the unpickler raises this
    when it meets the global, so the call never happens.
    """


class InvalidInputError(SecureFGError, ValueError):
    """A tensor or argument has the wrong shape, dtype, or contains NaN/Inf."""


# --- wire and protocol -------------------------------------------------------------------
class ProtocolError(SecureFGError):
    """A cross-party message or protocol step failed; the round cannot continue as is."""


class CodecError(ProtocolError, ValueError):
    """A received payload is malformed (bad magic, dtype, shape, size, trailing bytes)."""


class AuthenticationError(ProtocolError):
    """An envelope failed authentication: tampered, wrong key, or wrong binding."""


class ReplayError(AuthenticationError):
    """An envelope was replayed or delivered out of order."""


class SenderAuthenticationError(AuthenticationError):
    """A relayed item was not sealed by the party (or a member of the group) it must come from.

    Raised by a recipient for an item that a relay carried but its claimed sender did not seal:
    swapped or forged by the server (or the shuffler), tampered with, or replayed from another
    round or tag. ``sender`` names the party the item had to come from where the relay says
    so (unshuffled relays); in a shuffled relay nobody may know it, and ``slot`` names the
    item's position in the recipient's bundle instead.
    """

    def __init__(self, message: str, *, sender: str | None = None, slot: int | None = None) -> None:
        super().__init__(message)
        self.sender = sender
        self.slot = slot


class UnboundTagError(ProtocolError, KeyError):
    """A method emitted a message tag that the protocol stack does not bind."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else ""


class MechanismError(ProtocolError):
    """A protection mechanism could not complete (e.g. too few survivors)."""


class TooFewSurvivorsError(MechanismError):
    """Fewer clients than the threshold survived a secure-aggregation round."""


class SecretKeyError(ProtocolError):
    """A party tried to use a secret it does not hold (e.g. the server decrypting CKKS)."""


class OverflowRiskError(MechanismError):
    """A fixed-point encoding would overflow its ring for the given number of summands."""


class RingTooSmallError(OverflowRiskError):
    """A secure-sum ring cannot hold the stack's clip for n summands at the resolution asked for."""


class ServerUnreachableError(ProtocolError):
    """A party could not reach (or lost) the server it was pointed at within its time limit."""


class UnexpectedMessageError(ProtocolError):
    """A well-authenticated message arrived where the protocol does not expect it.

    Raised for a message bound to another stage, round or tag, or from a sender that is not
    expected at this point of the protocol (a protocol-level replay or reordering).
    """


class InvalidClaimError(MechanismError):
    """A client refused a server (or aggregator) claim that an honest server never makes.

    Examples: a list naming the same client twice, an unknown id, a client listed both dead
    and alive, or fewer than the threshold. ``reason`` carries the mechanism's abort-reason
    enum so callers can branch on it.
    """

    def __init__(self, message: str, *, reason: object = None) -> None:
        super().__init__(message)
        self.reason = reason


class ForgedClaimError(InvalidClaimError, AuthenticationError):
    """A server claim failed the malicious-server checks (pinned public keys plus signatures).

    Both an :class:`InvalidClaimError` (a client refused a claim; ``reason`` is the abort
    reason) and an :class:`AuthenticationError` (the claim does not verify against a party's
    pinned key). ``claim`` names the claim that lied, e.g. ``"the keys of 'client/2'"``.
    """

    def __init__(self, message: str, *, reason: object = None, claim: str = "") -> None:
        super().__init__(message, reason=reason)
        self.claim = claim


class KeySubstitutionError(ForgedClaimError):
    """Keys relayed for a party are not the ones it signed with its pinned key (or it has none)."""


class EquivocationError(ForgedClaimError):
    """The server may be telling clients different survivor (or client) lists: a signature over
    other lists, or too few clients vouching for the lists this client was shown."""


class ImplausibleSumError(MechanismError):
    """An unmasked sum lies outside what its contributors could produce within the declared
    bounds (``norm_bound``): a client shifted or wrapped it, or a bound is misdeclared."""


# --- privacy -----------------------------------------------------------------------------
class PerSampleGradientError(ConfigError):
    """A model cannot be trained with per-sample-gradient DP-SGD (Opacus); the message says why."""


# --- run time ----------------------------------------------------------------------------
class CheckpointError(SecureFGError):
    """A checkpoint is missing, corrupt or does not match the run configuration."""


class GeneratorCacheError(SecureFGError):
    """A cached generator (CeFGC phase 1) is incomplete or corrupt; delete the named files to retrain."""


class AttackBudgetExceeded(SecureFGError):
    """An audit attack exceeded the budget allowed by the threat model."""


class QueryBudgetError(ProtocolError):
    """An owner refused to answer more structure queries than its budget (FedStruct App. L.1)."""


class SubgroupTooSmallError(ConfigError):
    """A robust subgroup sum would cover fewer than ``k`` clients (too few to hide one update)."""

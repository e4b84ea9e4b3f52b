"""Secure sum with dropouts (SecAgg+) as two sans-IO objects that speak bytes.

[`SecureSumServer`][securefg.api.SecureSumServer] and [`SecureSumClient`][securefg.api.SecureSumClient]
drive securefg's own stage machines (``securefg/protocol/secure_sum/server`` and ``client``, one module per
stage) with no transport under them: every method takes the bytes a party received and returns the bytes it
must send. Moving those bytes (sockets, a queue, another FL framework's messages), deciding when a client
has dropped out, and authenticating the two ends to each other are the caller's. The protocol is Bonawitz et
al., CCS 2017 (https://eprint.iacr.org/2017/281) with the sparse neighbour graph of Bell et al., CCS 2020
(https://eprint.iacr.org/2020/704).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from securefg.api._config import StackLike, failed_protections, from_code, from_stack, transform_names
from securefg.api._wire import check_call, check_pid, frame, unframe
from securefg.errors import (
    AuthenticationError,
    CodecError,
    ConfigError,
    InvalidInputError,
    SecureFGError,
    UnexpectedMessageError,
)
from securefg.protocol.guarantees import FailedProtection
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.secure_sum import client as ss_client
from securefg.protocol.secure_sum import server as ss_server
from securefg.protocol.secure_sum.constants import ClientDropReason, Stage
from securefg.protocol.secure_sum.context import AggregatorContext, CallInfo, ClientContext
from securefg.protocol.secure_sum.harary import harary_graph
from securefg.protocol.secure_sum.mechanism import SecureSum
from securefg.protocol.secure_sum.pinned import PinnedKeys
from securefg.protocol.secure_sum.prg import ring_mask
from securefg.protocol.secure_sum.route import Delivery, Route
from securefg.protocol.secure_sum.settings import Settings

_SERVER = "server"
"""The aggregator's id inside the stage machines; it enters no key derivation in this mode."""


class SecureSumConfig:
    """The parameters of a secure sum, validated as a stack binding of ``secure_sum`` is.

    Build it from code with the stack's parameter names, or with ``from_stack``. Both sides of a
    call must use equal configs: a client refuses a server whose degree, threshold or vector
    length differ from what its own config gives for that many clients.

    Args:
        unsafe (str, optional): Why a setting that voids a protection (e.g. a threshold an
            equivocating server can beat) may run anyway; without it such a setting is refused.
            (default: ``None``)
        **params: ``bits``, ``resolution``, ``clip``, ``on_clip``, ``threshold``, ``degree``,
            ``dropout_rate``, ``adversarial_rate``, ``signatures``, ``prg``, ``pinned_keys``,
            ``norm_bound``, as documented on the ``secure_sum`` mechanism (docs/embedding.md).

    Raises:
        ConfigError: Every invalid parameter at once, or a voided protection without ``unsafe``.
    """

    def __init__(self, *, unsafe: str | None = None, **params: Any) -> None:
        if params.get("relay_sum"):
            raise ConfigError("SecureSumConfig: relay_sum applies to peer sums, which this API does not carry")
        res, stack = from_code("secure_sum", ExchangeKind.AGGREGATE, params, unsafe=unsafe, what="SecureSumConfig")
        self._init(cast(SecureSum, res.mechanism), failed_protections(res, stack), ())

    @classmethod
    def from_stack(cls, stack: StackLike, tag: str) -> SecureSumConfig:
        """The config of ``tag``'s ``secure_sum`` binding in a protocol stack.

        Args:
            stack (ProtocolStack | str | os.PathLike): A loaded stack, a TOML path, or the name of
                a shipped stack (``"fedavg_secure_sum"``).
            tag (str): The message tag (an ``aggregate`` exchange).

        Raises:
            ConfigError: An invalid stack, or ``tag`` bound to another mechanism.
            UnboundTagError: No pattern of the stack binds ``tag``.
        """
        res, st = from_stack(stack, tag, ExchangeKind.AGGREGATE, SecureSum, what="SecureSumConfig")
        self = cls.__new__(cls)
        self._init(cast(SecureSum, res.mechanism), failed_protections(res, st), transform_names(res.transforms))
        return self

    def _init(self, mech: SecureSum, failed: tuple[FailedProtection, ...], transforms: tuple[str, ...]) -> None:
        self._settings: Settings = mech.settings
        self.params: dict[str, Any] = dict(mech.params)
        """Every parameter, defaults included."""
        self.failed_protections = failed
        """Protections this config voids and waives with ``unsafe`` (empty unless ``unsafe`` was needed)."""
        self.transforms = transforms
        """Names of the client transforms the stack binds on the tag (e.g. ``("dp_gaussian",)``);
        they are not applied by the secure sum: run them on the input first
        ([`DPGaussianNoise`][securefg.api.DPGaussianNoise])."""

    def graph(self, clients: int) -> tuple[int, int]:
        """``(degree k, threshold t)`` of a call with ``clients`` clients."""
        return self._settings.graph(clients)

    def ring_bits(self, clients: int) -> int:
        """Bits per element of the ring a sum of ``clients`` vectors uses (and sends)."""
        return self._settings.ring_bits(clients)

    def error_bound(self, clients: int) -> float:
        """Worst-case absolute error per element of a sum over ``clients`` inputs (fixed point)."""
        return self._settings.quantizer(max(clients, 1)).error_bound(clients)

    def quantize(self, vector: torch.Tensor | np.ndarray, *, clients: int) -> np.ndarray:
        """``vector`` as the ring words a client of a ``clients``-client call sums (no mask): for
        checking that a sum is exact in the ring.

        Raises:
            OverflowRiskError: A value beyond ``clip`` with ``on_clip = "error"``.
        """
        return self._settings.quantizer(clients).quantize(_vector(vector, what="vector"))

    def __repr__(self) -> str:
        return f"SecureSumConfig({', '.join(f'{k}={v!r}' for k, v in sorted(self.params.items()) if v is not None)})"


@dataclass(frozen=True)
class SecureSumResult:
    """What the server learns from a completed call.

    Args:
        total (torch.Tensor): The sum over ``contributors``, dequantized (``float64``).
        ring_total (numpy.ndarray): The same sum as ring words (exact, modulo ``2**ring_bits``).
        contributors (tuple[str, ...]): The clients whose inputs are in the sum (the survivors).
        drops (Mapping[str, ClientDropReason]): Every client left out, and why.
        error_bound (float): Worst-case absolute error per element of ``total``.
        ring_bits (int): Bits per ring element.
        degree (int): Neighbours per client in the call's graph.
        threshold (int): Shares needed to reconstruct a secret.
    """

    total: torch.Tensor
    ring_total: np.ndarray
    contributors: tuple[str, ...]
    drops: Mapping[str, ClientDropReason]
    error_bound: float
    ring_bits: int
    degree: int
    threshold: int


class _Outbox(Route):
    """The paths of one call with no transport: what a stage sends is kept for the caller."""

    def __init__(self, *, round: int, tag: str) -> None:
        super().__init__(cast(Any, None), relay=_SERVER, aggregator=_SERVER, round=round, tag=tag)
        self.sent: list[tuple[str, Stage, bytes]] = []

    def up(self, sender: str, stage: Stage, payload: bytes) -> None:
        self.sent.append((_SERVER, stage, payload))

    def down(self, receiver: str, stage: Stage, payload: bytes) -> None:
        self.sent.append((receiver, stage, payload))

    def take(self) -> list[tuple[str, Stage, bytes]]:
        out, self.sent = self.sent, []
        return out


def _pinned(config: SecureSumConfig, keys: Mapping[str, bytes] | None, who: str) -> PinnedKeys | None:
    """The pinned directory a party was given, checked against its config."""
    wants = config.params.get("pinned_keys") is not None
    if wants and keys is None:
        raise ConfigError(f"{who}: the config asks for pinned_keys (malicious-server mode); pass pinned_keys="
                          "{client id: 32-byte Ed25519 public key} given to every party before the run")
    if not wants and keys is not None:
        raise ConfigError(f"{who}: pinned_keys given, but the config does not ask for them; set "
                          "pinned_keys and signatures = true in the config")
    if keys is None:
        return None
    bad = sorted(p for p, k in keys.items() if not isinstance(k, bytes) or len(k) != 32)
    if bad:
        raise InvalidInputError(f"{who}: pinned keys of {bad} are not 32-byte Ed25519 public keys")
    return PinnedKeys(dict(keys), source="securefg.api")


def _vector(x: torch.Tensor | np.ndarray, *, what: str) -> np.ndarray:
    arr = x.detach().to("cpu", torch.float64).numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInputError(f"{what} must be a non-empty 1-D vector, got shape {tuple(arr.shape)}")
    if not np.isfinite(arr).all():
        raise InvalidInputError(f"{what} holds NaN or Inf")
    return arr.copy()


class SecureSumClient:
    """One client's side of one secure-sum call: answers each server message with one message.

    Create one object per call (per round and tag); it holds the call's secret keys and shares and
    drops them when the call ends or fails. Every message from the server gets exactly one reply.

    Args:
        config (SecureSumConfig): The call's parameters (equal to the server's).
        pid (str): This client's id, as the server lists it.
        vector (torch.Tensor | numpy.ndarray): This client's 1-D input (already weighted, clipped
            and noised as the caller wants: the sum is taken as given).
        session (bytes): 16..64 bytes every party of the run shares (drawn once per run).
        round (int): The call's round (>= 0).
        tag (str): The call's tag; with ``session`` and ``round`` it binds every key and mask.
        signing_key (Ed25519PrivateKey, optional): Malicious-server mode: this client's static
            signing key, whose public half is ``pinned_keys[pid]``. (default: ``None``)
        pinned_keys (Mapping[str, bytes], optional): Malicious-server mode: every client's pinned
            32-byte Ed25519 public key. Required exactly when the config sets ``pinned_keys``.
            (default: ``None``)

    Raises:
        InvalidInputError: A vector that is not 1-D and finite, or a malformed call identity.
        ConfigError: Pinned keys missing or unexpected for the config.
        AuthenticationError: ``signing_key`` is not the key pinned for ``pid``.
    """

    def __init__(self, config: SecureSumConfig, *, pid: str, vector: torch.Tensor | np.ndarray, session: bytes,
                 round: int, tag: str, signing_key: Ed25519PrivateKey | None = None,
                 pinned_keys: Mapping[str, bytes] | None = None) -> None:
        check_call(session, round, tag)
        check_pid(pid)
        pinned = _pinned(config, pinned_keys, f"SecureSumClient {pid!r}")
        if pinned is not None:
            if signing_key is None:
                raise ConfigError(f"SecureSumClient {pid!r}: pinned keys need this client's signing_key")
            if pinned.key_of(pid) != signing_key.public_key().public_bytes_raw():
                raise AuthenticationError(f"the pinned directory holds another key for {pid!r} than its signing_key")
        self.pid = pid
        self._route = _Outbox(round=round, tag=tag)
        info = CallInfo(session, round, tag, config._settings, self._route, pinned=pinned)
        ctx = ClientContext(pid, info, _vector(vector, what=f"the input of {pid}"), identity=signing_key)
        self._stage: ss_client.ClientStage = ss_client.AdvertiseKeys(ctx)
        self._failed: SecureFGError | None = None

    @property
    def stage(self) -> str | None:
        """The stage whose message this client awaits (``None`` once done or failed)."""
        return None if self.done or self._failed else cast(Stage, self._stage.expects).value

    @property
    def done(self) -> bool:
        """Whether the call ended: this client sent its unmasking shares."""
        return isinstance(self._stage, ss_client.Done) and self._failed is None

    def handle(self, message: bytes) -> bytes:
        """Process one message from the server; return this client's reply, to send back.

        Raises:
            CodecError: ``message`` is not a securefg message.
            UnexpectedMessageError: A message of another stage, or any message after the call
                ended or failed.
            InvalidClaimError: The server claimed something an honest server never does
                (``reason`` is an [`AbortReason`][securefg.api.AbortReason]); the call is over for this
                client.
            KeySubstitutionError, EquivocationError: Malicious-server mode caught a forged claim.
            AuthenticationError: A share that does not authenticate.
            InvalidInputError: With ``norm_bound``, this client's own input is beyond it (refused
                before anything is sent); or a value beyond ``clip`` with ``on_clip = "error"``.
        """
        if self._failed is not None:
            raise UnexpectedMessageError(f"{self.pid}'s secure-sum call already failed: {self._failed}")
        stage_name, payload = unframe(message, what=f"message to {self.pid}")
        try:
            stage = Stage(stage_name)
        except ValueError:
            raise CodecError(f"message to {self.pid}: unknown secure-sum stage {stage_name!r}") from None
        try:
            self._stage = self._stage.handle(Delivery(_SERVER, stage, payload))
        except UnexpectedMessageError:
            raise  # a stray message leaves the call as it was
        except SecureFGError as exc:
            self._abort(exc)
            raise
        (sent,) = self._route.take()
        if isinstance(self._stage, ss_client.Done):
            self._forget()
        return frame(sent[1].value, sent[2])

    def _abort(self, exc: SecureFGError) -> None:
        """The call failed for this client: forget its secrets; every later message is refused."""
        self._failed = exc
        self._forget()

    def _forget(self) -> None:
        """Drop the call's secrets (keys, shares held, self-mask seed) once they can serve no more."""
        ctx = self._stage.ctx
        ctx.held.clear()
        ctx.c_sk = ctx.s_sk = ctx.sign_sk = None
        ctx.b_seed = b""
        ctx.vector = ctx.vector[:0]
        self._stage = ss_client.Done(ctx)


class SecureSumServer:
    """The server's side of one secure-sum call: it learns only the sum over the survivors.

    Drive it stage by stage: ``start`` returns the first message for each online client; each
    ``receive`` takes the replies that came back for the current stage (a client missing from
    them has dropped out) and returns the next stage's messages, until ``done`` and
    ``result``. The call is aborted (nothing is revealed) when fewer than ``max(t, 2)``
    clients remain.

    Args:
        config (SecureSumConfig): The call's parameters (equal to the clients').
        clients (Sequence[str]): Every client of the call (distinct ids); sorted internally.
        length (int): Elements per input vector.
        session (bytes): The run's session bytes (as the clients').
        round (int): The call's round.
        tag (str): The call's tag.
        pinned_keys (Mapping[str, bytes], optional): Malicious-server mode: the clients' pinned
            public keys (the server checks signatures too). (default: ``None``)

    Raises:
        InvalidInputError: Fewer than two clients, repeated ids, or a length below 1.
    """

    def __init__(self, config: SecureSumConfig, *, clients: Sequence[str], length: int, session: bytes, round: int,
                 tag: str, pinned_keys: Mapping[str, bytes] | None = None) -> None:
        check_call(session, round, tag)
        members = tuple(sorted(check_pid(c, "client id") for c in clients))
        if len(set(members)) != len(members) or len(members) < 2:
            raise InvalidInputError(f"a secure sum needs at least two distinct clients, got {list(clients)}")
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise InvalidInputError(f"length must be an integer >= 1, got {length!r}")
        self._route = _Outbox(round=round, tag=tag)
        info = CallInfo(session, round, tag, config._settings, self._route,
                        pinned=_pinned(config, pinned_keys, "SecureSumServer"))
        degree, threshold = config.graph(len(members))
        self._ctx = AggregatorContext(
            pid=_SERVER, info=info, clients=members, graph=harary_graph(members, degree), degree=degree,
            threshold=threshold, length=length, quantizer=config._settings.quantizer(len(members)),
        )
        self.clients = members
        self._stage: ss_server.ServerStage | None = None
        self.result: SecureSumResult | None = None
        """The sum, once ``done``."""

    @property
    def stage(self) -> str | None:
        """The stage whose replies the server awaits (``None`` before ``start`` and when done)."""
        if self._stage is None or self.done:
            return None
        return cast(Stage, self._stage.stage).value

    @property
    def done(self) -> bool:
        """Whether the sum is known (``result``)."""
        return self.result is not None

    @property
    def drops(self) -> dict[str, ClientDropReason]:
        """Clients dropped so far, and why."""
        return dict(self._ctx.drops)

    def start(self, online: Collection[str] | None = None) -> dict[str, bytes]:
        """Begin the call: ``{client: message}`` for every online client (default: all).

        Raises:
            UnexpectedMessageError: Called twice.
        """
        if self._stage is not None:
            raise UnexpectedMessageError("SecureSumServer.start was already called")
        self._stage = ss_server.begin(self._ctx, set(self.clients if online is None else online))
        return self._outgoing()

    def receive(self, replies: Mapping[str, bytes]) -> dict[str, bytes]:
        """Take the current stage's replies; return the next stage's ``{client: message}``
        (empty once ``done``).

        A client missing from ``replies`` is dropped (``NO_RESPONSE``); a reply that does not
        parse, belongs to another stage or fails the stage's checks drops its client
        (``MALFORMED_MESSAGE`` and the stage's own reasons). Dropped clients get no more messages.

        Raises:
            UnexpectedMessageError: Before ``start``, after the end, or a reply from an id that
                is not a client of the call.
            TooFewSurvivorsError: Too few clients left; the call is aborted and reveals nothing.
            MechanismError: Corrupt unmasking shares (a reconstructed key does not match).
            ImplausibleSumError: With ``norm_bound``, a sum its contributors could not make.
        """
        if self._stage is None or self.done:
            raise UnexpectedMessageError("SecureSumServer.receive outside a running call (start it, or it is done)")
        expected = cast(Stage, self._stage.stage)
        deliveries = []
        for pid in sorted(replies):
            if pid not in self.clients:
                raise UnexpectedMessageError(f"{pid!r} is not a client of this secure-sum call")
            try:
                name, payload = unframe(replies[pid], what=f"reply of {pid}")
            except CodecError:
                name, payload = "", b""
            if name != expected.value:
                self._ctx.drop(pid, ClientDropReason.MALFORMED_MESSAGE)
                continue
            deliveries.append(Delivery(pid, expected, payload))
        self._stage = self._stage.handle(deliveries)
        if isinstance(self._stage, ss_server.Completed):
            done = self._stage
            words = cast(np.ndarray, done.ring_total)
            self.result = SecureSumResult(
                total=done.total, ring_total=words & words.dtype.type(ring_mask(self._ctx.quantizer.bits)),
                contributors=done.contributors,
                drops=dict(self._ctx.drops), error_bound=self._ctx.quantizer.error_bound(len(done.contributors)),
                ring_bits=self._ctx.quantizer.bits, degree=self._ctx.degree, threshold=self._ctx.threshold,
            )
        return self._outgoing()

    def _outgoing(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for receiver, stage, payload in self._route.take():
            if receiver in out:  # each stage sends a client at most one message
                raise UnexpectedMessageError(f"the aggregator sent {receiver} two {stage.value!r} messages")
            out[receiver] = frame(stage.value, payload)
        return out

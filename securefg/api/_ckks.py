"""CKKS aggregate, personalized aggregate and similarity as sans-IO objects that speak bytes.

Three roles, each its own type (STYLE.md, "secrets in server-side objects"): the
[`CKKSKeyHolder`][securefg.api.CKKSKeyHolder] alone generates and holds the secret key; a
[`CKKSClient`][securefg.api.CKKSClient] encrypts (and, once the key holder sealed it the secret context,
decrypts a personalized result); the [`CKKSServer`][securefg.api.CKKSServer] holds a public context that
refuses a secret key, adds and mixes ciphertexts and never decrypts. The key holder can be one of the
clients or a party of its own. Every message is framed with its stage name (``ckks/upload``,
``ckks/decrypt/request``, ...). Flows and who learns what are those of ``securefg.protocol.ckks.aggregate``,
``personalized`` and ``similarity``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import torch

from securefg.api._config import StackLike, failed_protections, from_code, from_stack, transform_names
from securefg.api._wire import check_pid, frame, unframe
from securefg.errors import (
    CodecError,
    ConfigError,
    InvalidInputError,
    MechanismError,
    ProtocolError,
    SecretKeyError,
    UnexpectedMessageError,
)
from securefg.federation.channel import length_prefixed
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.protocol.ckks.ckks_mechanism import CKKS
from securefg.protocol.ckks.constants import SECRET_CONTEXT_LABEL, Stage
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.output_noise import OutputNoise
from securefg.protocol.ckks.presets import CKKSPreset
from securefg.protocol.ckks.public_context import PublicContext
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.ckks.similarity import (
    check_metric,
    lift_squared,
    pair_products,
    prepare_input,
    release_products,
    unpermute,
)
from securefg.protocol.guarantees import FailedProtection
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.relay.blob_list import unpack_blobs
from securefg.protocol.relay.sealed_box import SealingKey, seal

_KINDS = {"aggregate": ExchangeKind.AGGREGATE, "personalized_aggregate": ExchangeKind.PERSONALIZED_AGGREGATE,
          "similarity": ExchangeKind.SIMILARITY}


class CKKSConfig:
    """The parameters of a CKKS key session and its exchanges, validated as a ``ckks`` binding is.

    Every party of a key session must use equal configs (a received context or ciphertext with
    other parameters is refused).

    Args:
        unsafe (str, optional): Why a setting that voids a protection (``output_noise = "none"``)
            may run anyway; without it such a setting is refused. (default: ``None``)
        **params: ``preset`` (``"default"``: N=8192, or ``"deep"``), or ``poly_modulus_degree``,
            ``coeff_mod_bit_sizes`` and ``scale_bits`` together (checked for 128-bit security);
            ``output_noise`` (``"flood"``), ``flood_std``, ``round_bits``, ``rerandomize``, as
            documented on the ``ckks`` mechanism (docs/embedding.md). ``key_holder`` is accepted
            for stack compatibility and ignored: here whoever builds the
            [`CKKSKeyHolder`][securefg.api.CKKSKeyHolder] holds the key.

    Raises:
        ConfigError: Every invalid or insecure parameter at once.
    """

    def __init__(self, *, unsafe: str | None = None, **params: Any) -> None:
        res, stack = from_code("ckks", ExchangeKind.AGGREGATE, params, unsafe=unsafe, what="CKKSConfig")
        self._init(cast(CKKS, res.mechanism), failed_protections(res, stack), ())

    @classmethod
    def from_stack(cls, stack: StackLike, tag: str, *, exchange: str = "aggregate") -> CKKSConfig:
        """The config of ``tag``'s ``ckks`` binding in a protocol stack.

        Args:
            stack (ProtocolStack | str | os.PathLike): A loaded stack, a TOML path, or a shipped
                stack's name (``"fedavg_ckks"``).
            tag (str): The message tag.
            exchange (str): ``"aggregate"``, ``"personalized_aggregate"`` or ``"similarity"``.
                (default: ``"aggregate"``)

        Raises:
            ConfigError: An invalid stack, an unknown exchange, or ``tag`` bound to another mechanism.
            UnboundTagError: No pattern of the stack binds ``tag``.
        """
        if exchange not in _KINDS:
            raise ConfigError(f"Could not resolve exchange {exchange!r} among choices {sorted(_KINDS)}")
        res, st = from_stack(stack, tag, _KINDS[exchange], CKKS, what="CKKSConfig")
        self = cls.__new__(cls)
        self._init(cast(CKKS, res.mechanism), failed_protections(res, st), transform_names(res.transforms))
        return self

    def _init(self, mech: CKKS, failed: tuple[FailedProtection, ...], transforms: tuple[str, ...]) -> None:
        self._mech = mech
        self.params: dict[str, Any] = dict(mech.params)
        """Every parameter, defaults included."""
        self.failed_protections = failed
        """Protections this config voids and waives with ``unsafe``."""
        self.transforms = transforms
        """Names of the client transforms the stack binds on the tag (run them on the input first)."""

    @property
    def preset(self) -> CKKSPreset:
        """The CKKS parameters (``slots`` per ciphertext, ``levels``, ``fingerprint``)."""
        return self._mech.preset

    @property
    def _noise(self) -> OutputNoise:
        return self._mech.noise

    def __repr__(self) -> str:
        return f"CKKSConfig({self.preset.fingerprint}, output_noise={self.params['output_noise']!r})"


def _vector(x: torch.Tensor | Any, what: str) -> torch.Tensor:
    v = torch.as_tensor(x).detach().to("cpu", torch.float64)
    if v.dim() != 1 or v.numel() == 0:
        raise InvalidInputError(f"{what} must be a non-empty 1-D vector, got shape {tuple(v.shape)}")
    if not torch.isfinite(v).all():
        raise InvalidInputError(f"{what} holds NaN or Inf")
    return v


def _binding(session: bytes, holder: str, recipient: str, preset: CKKSPreset) -> bytes:
    """Associated data of a sealed secret context (as ``CKKSKeySetup``)."""
    return length_prefixed(SECRET_CONTEXT_LABEL, session, holder.encode(), recipient.encode(), preset.fingerprint.encode())


def _expect(message: bytes, stage: str, what: str) -> bytes:
    got, payload = unframe(message, what=what)
    if got != stage:
        raise CodecError(f"{what}: expected a {stage!r} message, got {got!r}")
    return payload


class _Encryptor:
    """What every holder of a context can do: encrypt an input for the server."""

    _context: SecretContext | PublicContext
    _config: CKKSConfig

    def encrypt(self, vector: torch.Tensor) -> bytes:
        """This party's 1-D input to an ``aggregate`` or ``personalized_aggregate``, encrypted:
        a ``ckks/upload`` message for the server.

        Raises:
            InvalidInputError: Not a finite 1-D vector.
        """
        return frame(Stage.UPLOAD, self._context.encrypt(_vector(vector, "a CKKS input")).to_bytes())

    def encrypt_for_similarity(self, vector: torch.Tensor, *, metric: str = "cosine") -> bytes:
        """This party's vector for a ``similarity`` (normalized and lifted for ``cosine``; windowed):
        a ``ckks/upload`` message for the server.

        Raises:
            InvalidInputError: An unknown metric, or not a finite 1-D vector.
            OverflowRiskError: ``dot`` with a squared norm the preset cannot decrypt.
        """
        check_metric(metric)
        x = prepare_input(_vector(vector, "a similarity input"), metric, self._config.preset, "this party")
        return frame(Stage.UPLOAD, self._context.encrypt(x, window=True).to_bytes())


class CKKSKeyHolder(_Encryptor):
    """The party that holds the CKKS secret key: it makes the keys and decrypts released values.

    It releases only what its methods name: the flooded decryption of a sum, and of similarity
    scalars. It never sees an individual upload unless a malicious server sends one in place of the
    sum (semi-honest security; see docs/embedding.md).

    Args:
        config (CKKSConfig): The key session's parameters.
        pid (str): The key holder's id (bound into sealed secret contexts). (default: ``"keyholder"``)
        session (bytes, optional): The run's session bytes; needed only to seal the secret context
            to decrypting clients. (default: ``None``)
    """

    def __init__(self, config: CKKSConfig, *, pid: str = "keyholder", session: bytes | None = None) -> None:
        self._config, self.pid, self._session = config, check_pid(pid), session
        self._secret = SecretContext.generate(config.preset)
        self._context = self._secret

    def public_context(self, *, galois: bool = False) -> bytes:
        """The public context (public and relinearization keys; Galois keys for a server that computes
        similarities): a ``ckks/keys/public`` message for the server and encrypting clients."""
        return frame(Stage.PUBLIC_CONTEXT, self._secret.public_bytes(galois=galois))

    def seal_secret_context(self, *, recipient: str, sealing_public_key: bytes) -> bytes:
        """The secret context sealed to a client that must decrypt a personalized result: a
        ``ckks/keys/secret`` message only that client opens (X25519 + HKDF + ChaCha20-Poly1305 bound
        to the session, both ids and the parameters).

        Args:
            recipient (str): The client's id.
            sealing_public_key (bytes): The client's ``SealingKey.public_bytes``, received over
                a channel the server cannot alter.

        Raises:
            ConfigError: The key holder was built without ``session``.
            CodecError: A public key that is not 32 bytes.
        """
        if self._session is None:
            raise ConfigError("CKKSKeyHolder needs session= to seal its secret context to a client")
        box = seal(sealing_public_key, self._secret.secret_bytes(),
                   context=_binding(self._session, self.pid, check_pid(recipient), self._config.preset))
        return frame(Stage.SECRET_CONTEXT, box)

    def release_sum(self, message: bytes, *, length: int) -> bytes:
        """Decrypt the server's summed ciphertext, flood it (``output_noise``) and release it: a
        ``ckks/decrypt/result`` message for the server.

        Raises:
            CodecError: Not a ``ckks/decrypt/request`` of ``length`` values under these parameters.
        """
        payload = _expect(message, Stage.DECRYPT_REQUEST, "CKKS decrypt request")
        values = self._secret.decrypt(self._secret.load(payload, expected_length=length))
        return frame(Stage.DECRYPT_RESULT, encode_tensor(self._config._noise(values)))

    def release_similarity(self, message: bytes, *, clients: int, metric: str = "cosine") -> bytes:
        """Decrypt the server's shuffled pair products, undo the public lift, flood and release them:
        a ``ckks/similarity/result`` message for the server.

        Args:
            message (bytes): The server's ``ckks/similarity/request``.
            clients (int): The most clients the call may have (bounds the work a request can ask for).
            metric (str): ``"cosine"`` or ``"dot"``, as the clients encrypted. (default: ``"cosine"``)

        Raises:
            CodecError: Not a request of ``k (k + 1) / 2`` products for some ``k <= clients``.
        """
        check_metric(metric)
        payload = _expect(message, Stage.SIMILARITY_REQUEST, "CKKS similarity request")
        count = len(unpack_blobs(payload, max_count=clients * (clients + 1) // 2))
        k = (math.isqrt(8 * count + 1) - 1) // 2
        if k * (k + 1) // 2 != count or count == 0:
            raise CodecError(f"CKKS similarity request: {count} products are not the pairs of any client set")
        return frame(Stage.SIMILARITY_RESULT, release_products(
            self._secret, payload, count=count, lift2=lift_squared(metric, self._config.preset), noise=self._config._noise))

    def decrypt(self, message: bytes, *, length: int) -> torch.Tensor:
        """Decrypt a ``ckks/personalized/result`` addressed to the key holder itself (when it is a
        receiver too).

        Raises:
            CodecError: Not such a message of ``length`` values.
        """
        payload = _expect(message, Stage.PERSONALIZED_RESULT, "CKKS personalized result")
        return self._secret.decrypt(self._secret.load(payload, expected_length=length))

    def __repr__(self) -> str:
        return f"CKKSKeyHolder({self.pid!r}, {self._config.preset.fingerprint})"


class CKKSClient(_Encryptor):
    """A client of a CKKS key session: it encrypts its inputs; with the sealed secret context it also
    decrypts what the server computed for it (``personalized_aggregate``).

    Args:
        config (CKKSConfig): The key session's parameters.
        public_context (bytes): The key holder's ``ckks/keys/public`` message, received over a channel
            the server cannot alter (a server that swaps in its own context decrypts every upload).

    Raises:
        CodecError: Not a public context with the config's parameters.
        SecretKeyError: The bytes carry a secret key.
    """

    def __init__(self, config: CKKSConfig, *, public_context: bytes) -> None:
        self._config = config
        raw = _expect(public_context, Stage.PUBLIC_CONTEXT, "CKKS public context")
        self._context = PublicContext.from_bytes(raw, preset=config.preset)

    @classmethod
    def from_sealed_secret(cls, config: CKKSConfig, message: bytes, *, pid: str, holder: str, session: bytes,
                           sealing_key: SealingKey) -> CKKSClient:
        """A decrypting client: open the secret context ``holder`` sealed to ``pid``.

        Args:
            config (CKKSConfig): The key session's parameters.
            message (bytes): The key holder's ``ckks/keys/secret`` message for this client.
            pid (str): This client's id.
            holder (str): The key holder's id.
            session (bytes): The run's session bytes.
            sealing_key (SealingKey): This client's sealing key (whose public half the holder used).

        Raises:
            AuthenticationError: Not sealed to this client, by this holder, for this session.
            CodecError: Not a context with the config's parameters.
        """
        box = _expect(message, Stage.SECRET_CONTEXT, "CKKS secret context")
        raw = sealing_key.open(box, context=_binding(session, holder, check_pid(pid), config.preset))
        self = cls.__new__(cls)
        self._config = config
        self._context = SecretContext.from_secret_bytes(raw, preset=config.preset)
        return self

    def decrypt(self, message: bytes, *, length: int) -> torch.Tensor:
        """This client's ``personalized_aggregate`` result: ``sum_j A_ij x_j``.

        Raises:
            SecretKeyError: This client holds only the public context.
            CodecError: Not a ``ckks/personalized/result`` of ``length`` values.
        """
        payload = _expect(message, Stage.PERSONALIZED_RESULT, "CKKS personalized result")
        if not isinstance(self._context, SecretContext):
            raise SecretKeyError("this CKKSClient holds only the public context; build it with from_sealed_secret")
        return self._context.decrypt(self._context.load(payload, expected_length=length))


class CKKSServer:
    """The server of a CKKS key session: it adds and mixes ciphertexts and cannot decrypt.

    One object can serve many calls; each method is one step of one call. Uploads that do not parse
    (or hold another length) are left out and named in ``drops``; the call goes on without them.

    Args:
        config (CKKSConfig): The key session's parameters.
        public_context (bytes): The key holder's ``ckks/keys/public`` message (``galois=True`` for
            similarities).

    Raises:
        SecretKeyError: The context carries a secret key (the server must never hold one).
        CodecError: Not a context with the config's parameters.
    """

    def __init__(self, config: CKKSConfig, *, public_context: bytes) -> None:
        self._config = config
        raw = _expect(public_context, Stage.PUBLIC_CONTEXT, "CKKS public context")
        self._context = PublicContext.from_bytes(raw, preset=config.preset)
        self.drops: dict[str, str] = {}
        """Clients whose last upload was left out, and why."""
        self.contributors: tuple[str, ...] = ()
        """The clients in the last sum, personalized mix or similarity."""
        self._plan: tuple[list[tuple[str, str]], list[int], list[str]] | None = None

    def is_public(self) -> bool:
        """Always true: the server's context holds no secret key."""
        return self._context.is_public()

    def _load(self, uploads: Mapping[str, bytes], length: int | None) -> dict[str, EncryptedVector]:
        self.drops, cts = {}, {}
        for pid in sorted(uploads):
            try:
                cts[pid] = self._context.load(_expect(uploads[pid], Stage.UPLOAD, f"upload of {pid}"),
                                              expected_length=length)
            except CodecError as exc:
                self.drops[pid] = f"malformed upload: {exc}"
        if len({c.length for c in cts.values()}) > 1:
            raise ProtocolError(f"CKKS uploads have different lengths {sorted({c.length for c in cts.values()})}")
        if not cts:
            raise MechanismError(f"no usable CKKS upload (left out: {self.drops})")
        self.contributors = tuple(cts)
        return cts

    def sum(self, uploads: Mapping[str, bytes], *, length: int) -> bytes:
        """Add the uploads: the ``ckks/decrypt/request`` message for the key holder.

        Raises:
            MechanismError: No upload is usable.
        """
        total: EncryptedVector | None = None
        for ct in self._load(uploads, length).values():
            total = ct if total is None else total + ct
        return frame(Stage.DECRYPT_REQUEST, cast(EncryptedVector, total).to_bytes())

    def read_sum(self, message: bytes, *, length: int) -> torch.Tensor:
        """The sum the key holder released (flooded): ``sum_k x_k`` over ``contributors``.

        Raises:
            CodecError: Not a ``ckks/decrypt/result`` of ``length`` values.
        """
        payload = _expect(message, Stage.DECRYPT_RESULT, "CKKS decrypt result")
        return decode_tensor(payload, spec=TensorSpec({"x": (torch.float64, (length,))}))

    def personalized(self, uploads: Mapping[str, bytes], coefficients: Mapping[str, Mapping[str, float]], *,
                     length: int) -> dict[str, bytes]:
        """For each receiver ``i``, ``Enc(sum_j A_ij x_j)`` with public scalars: ``{i: message}``.

        Args:
            uploads (Mapping[str, bytes]): ``{j: ckks/upload}``.
            coefficients (Mapping[str, Mapping[str, float]]): ``A`` as ``{i: {j: a_ij}}``; a missing
                or dropped ``j`` counts as zero.
            length (int): Values per input.

        Raises:
            InvalidInputError: A non-finite coefficient.
            ConfigError: A preset without the level a scalar product needs.
        """
        self._config.preset.require_levels(1, what="personalized_aggregate (ciphertext times public scalar)")
        cts = self._load(uploads, length)
        out = {}
        for i in sorted(coefficients):
            terms = []
            for j, a in sorted(coefficients[i].items()):
                if not math.isfinite(float(a)):
                    raise InvalidInputError(f"coefficient A[{i!r}][{j!r}] = {a} is not finite")
                if j in cts and float(a) != 0.0:
                    terms.append((cts[j], float(a)))
            if self._config.params["rerandomize"] or not terms:
                terms.append((self._context.encrypt_zeros(length), 1.0))
            out[i] = frame(Stage.PERSONALIZED_RESULT, EncryptedVector.linear_combination(terms).to_bytes())
        return out

    def similarity(self, uploads: Mapping[str, bytes]) -> bytes:
        """Every pair's masked inner product, in a CSPRNG order: the ``ckks/similarity/request``
        message for the key holder (the order stays with this object for ``read_similarity``).

        Raises:
            ConfigError: A public context without Galois keys, or a preset without two levels.
        """
        if not self._context.has_galois_keys():
            raise ConfigError("similarity needs the key holder's public context with galois=True")
        self._config.preset.require_levels(2, what="encrypted similarity (ciphertext product, then a mask)")
        cts = self._load(uploads, None)
        order = sorted(cts)
        pairs, perm, request = pair_products(cts, order)
        self._plan = (pairs, perm, order)
        return frame(Stage.SIMILARITY_REQUEST, request)

    def read_similarity(self, message: bytes) -> tuple[list[str], torch.Tensor]:
        """The similarity matrix the key holder released: ``(client order, matrix)``.

        Raises:
            UnexpectedMessageError: No similarity request is pending.
            CodecError: Not a ``ckks/similarity/result`` for the pending request.
        """
        if self._plan is None:
            raise UnexpectedMessageError("read_similarity without a pending similarity request")
        pairs, perm, order = self._plan
        self._plan = None
        values = unpermute(pairs, perm, _expect(message, Stage.SIMILARITY_RESULT, "CKKS similarity result"))
        return order, torch.tensor([[values[(a, b)] for b in order] for a in order], dtype=torch.float64)

    def __repr__(self) -> str:
        return f"CKKSServer({self._config.preset.fingerprint}, public)"

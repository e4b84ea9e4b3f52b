"""CKKS key roles and their one-time distribution (cefgc.md §6.1 item 11).

Roles:

* **Key holder** -- the ``keyholder`` party (:data:`~securefg.federation.party.KEY_AUTHORITY`) when
  the federation has one, else the ``key_holder`` parameter, else the lowest-numbered client.
  It generates the context (SEAL draws keys from the OS CSPRNG) and keeps the secret key.
* **Server** -- receives only ``SecretContext.public_bytes()``: public + relinearization keys,
  plus Galois keys (~35 MB at N=8192 instead of ~1.9 MB) only once an exchange needs rotations.
  It holds a :class:`~securefg.protocol.ckks.public_context.PublicContext`, which refuses secret keys.
* **Decrypting clients** (receivers of personalized sums or CKKS relays) -- receive the secret
  context sealed to them: X25519 (ephemeral) + HKDF-SHA256 + ChaCha20-Poly1305 to the sealing key
  they published over an authenticated channel (:mod:`securefg.protocol.relay.sealing_directory`),
  with associated data binding session, key holder, recipient and parameters.
* **Encrypt-only clients** (aggregate uploads) -- receive the public context only.

Everything is cached in each party's ``"ckks"`` state for the transport session, so the setup runs
once; its envelopes (``Form.KEYS``) are in the transcript under the tag that triggered it.
Security rests on the server colluding with *no* secret-key holder: a colluding pair can
decrypt every upload.
"""

from __future__ import annotations

from collections.abc import Iterable

from securefg.errors import ConfigError, MechanismError, SecretKeyError
from securefg.federation.channel import length_prefixed
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import KEY_AUTHORITY, client_index, is_client
from securefg.protocol.ckks.constants import NAMESPACE, SECRET_CONTEXT_LABEL, Stage
from securefg.protocol.ckks.presets import CKKSPreset
from securefg.protocol.ckks.public_context import PublicContext
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.relay import sealing_directory
from securefg.protocol.relay.sealed_box import seal

Context = SecretContext | PublicContext


class CKKSKeySetup:
    """Decides who holds which CKKS key and makes sure they hold it.

    Args:
        preset (CKKSPreset): Parameters of the key session.
        key_holder (str, optional): Party id of the key holder; ignored when a ``keyholder`` party
            exists. (default: the lowest-numbered client)
    """

    def __init__(self, preset: CKKSPreset, *, key_holder: str | None = None) -> None:
        self.preset = preset
        self.key_holder = key_holder

    def holder(self, call: ExchangeCall) -> str:
        """The key holder for this call (all parties compute the same answer)."""
        if KEY_AUTHORITY in call.parties:
            return KEY_AUTHORITY
        if self.key_holder is not None:
            if self.key_holder == call.server:
                raise ConfigError("key_holder cannot be the server: it must never hold the CKKS secret key")
            if self.key_holder not in call.parties:
                raise ConfigError(f"key_holder {self.key_holder!r} is not a party of this federation")
            return self.key_holder
        clients = sorted((p for p in call.parties if is_client(p)), key=client_index)
        if not clients:
            raise ConfigError("CKKS needs a client or a 'keyholder' party to hold the secret key")
        return clients[0]

    # -------------------------------------------------------------------------- state
    def _slot(self, call: ExchangeCall, holder: str) -> str:
        return f"{call.transport.session.hex()}/{holder}/{self.preset.fingerprint}"

    def _get(self, call: ExchangeCall, pid: str, holder: str) -> Context | None:
        keys = call.state_of(pid, NAMESPACE).setdefault("keys", {})
        return keys.get(self._slot(call, holder))  # type: ignore[no-any-return]

    def _put(self, call: ExchangeCall, pid: str, holder: str, ctx: Context) -> None:
        if pid == call.server and not isinstance(ctx, PublicContext):
            raise SecretKeyError("the server may only ever hold a PublicContext")
        call.state_of(pid, NAMESPACE).setdefault("keys", {})[self._slot(call, holder)] = ctx

    def held(self, call: ExchangeCall, pid: str) -> Context | None:
        """The context ``pid`` holds for this call's key session, or ``None`` (acting as ``pid``)."""
        return self._get(call, pid, self.holder(call))

    def context_of(self, call: ExchangeCall, pid: str) -> Context:
        """The context ``pid`` holds (after :meth:`ensure`)."""
        ctx = self._get(call, pid, self.holder(call))
        if ctx is None:
            raise MechanismError(f"{pid!r} holds no CKKS context for this session; key setup did not reach it")
        return ctx

    def secret_of(self, call: ExchangeCall, pid: str) -> SecretContext:
        """The secret context of ``pid``; raises :class:`SecretKeyError` if it holds none."""
        ctx = self.context_of(call, pid)
        if not isinstance(ctx, SecretContext):
            raise SecretKeyError(f"{pid!r} holds only a public CKKS context and cannot decrypt")
        return ctx

    # -------------------------------------------------------------------------- setup
    def ensure(
        self, call: ExchangeCall, *, encryptors: Iterable[str], decryptors: Iterable[str], galois: bool
    ) -> str:
        """Generate and distribute whatever keys are still missing; return the key holder.

        Args:
            call (ExchangeCall): The exchange being served.
            encryptors (Iterable[str]): Parties that must encrypt (get at least a public context).
            decryptors (Iterable[str]): Clients that must decrypt (get the sealed secret context).
            galois (bool): Whether the server needs Galois keys (rotations, dot products).

        Raises:
            SecretKeyError: if the server is listed as a decryptor.
            MechanismError: if the key holder is offline.
        """
        holder = self.holder(call)
        offline = call.transport.offline
        if holder in offline:
            raise MechanismError(
                f"CKKS key holder {holder!r} is offline; nobody can decrypt. Add a 'keyholder' "
                "party that stays online, or set key_holder to a reliable client"
            )
        decryptors = [p for p in dict.fromkeys(decryptors) if p != holder and p not in offline]
        if call.server in decryptors:
            raise SecretKeyError("the server may never receive the CKKS secret key")
        secret = self.holder_secret(call, holder)

        server_ctx = self._get(call, call.server, holder)
        if server_ctx is None or (galois and not server_ctx.has_galois_keys()):
            self._send_public(call, holder, secret, [call.server], galois=galois)

        need_secret = [p for p in decryptors if not isinstance(self._get(call, p, holder), SecretContext)]
        if need_secret:
            self._send_secret(call, holder, secret, need_secret)

        need_public = [
            p
            for p in dict.fromkeys(encryptors)
            if p not in (holder, call.server) and p not in offline and self._get(call, p, holder) is None
        ]
        if need_public:
            self._send_public(call, holder, secret, need_public, galois=False)
        return holder

    def _send_public(
        self, call: ExchangeCall, holder: str, secret: SecretContext, to: list[str], *, galois: bool
    ) -> None:
        self.send_public(call, holder, secret, to, galois=galois)
        for pid in to:
            (env,) = call.transport.receive_from(
                pid, [holder], tag=call.tag, round=call.round, stage=Stage.PUBLIC_CONTEXT
            ).values()
            self.accept_public(call, pid, holder, env)

    def _binding(self, call: ExchangeCall, holder: str, recipient: str) -> bytes:
        return length_prefixed(
            SECRET_CONTEXT_LABEL,
            call.transport.session,
            holder.encode(),
            recipient.encode(),
            self.preset.fingerprint.encode(),
        )

    def _send_secret(self, call: ExchangeCall, holder: str, secret: SecretContext, to: list[str]) -> None:
        sealing_directory.ensure(call, holders=[holder], owners=to)
        self.send_secret(call, holder, secret, to)
        for pid in to:
            (env,) = call.transport.receive_from(
                pid, [holder], tag=call.tag, round=call.round, stage=Stage.SECRET_CONTEXT
            ).values()
            self.accept_secret(call, pid, holder, env)

    # ------------------------------------------------- role halves (one party each)
    # The in-process ``ensure`` runs both ends of each step; a networked backend, where each
    # party is its own process, runs each end in its owner's process with these.
    def holder_secret(self, call: ExchangeCall, holder: str) -> SecretContext:
        """Acting as ``holder``: its secret context for this key session (generated on first use)."""
        secret = self._get(call, holder, holder)
        if secret is None:
            secret = SecretContext.generate(self.preset)
            self._put(call, holder, holder, secret)
        if not isinstance(secret, SecretContext):
            raise SecretKeyError(f"{holder!r} is the key holder but holds only a public context")
        return secret

    def send_public(
        self, call: ExchangeCall, holder: str, secret: SecretContext, to: list[str], *, galois: bool
    ) -> None:
        """Acting as ``holder``: one ``Form.KEYS`` envelope with the public context for ``to``."""
        raw = secret.public_bytes(galois=galois)
        call.transport.send(
            Envelope(holder, tuple(to), call.round, call.tag, raw, stage=Stage.PUBLIC_CONTEXT, form=Form.KEYS)
        )

    def accept_public(self, call: ExchangeCall, pid: str, holder: str, env: Envelope) -> None:
        """Acting as ``pid``: keep the public context ``holder`` sent (a :class:`PublicContext`)."""
        if env.sender != holder or env.stage != Stage.PUBLIC_CONTEXT:
            raise MechanismError(f"{pid!r} expected a public context from {holder!r}, got {env.stage!r} from {env.sender!r}")
        self._put(call, pid, holder, PublicContext.from_bytes(env.payload, preset=self.preset))

    def send_secret(self, call: ExchangeCall, holder: str, secret: SecretContext, to: list[str]) -> None:
        """Acting as ``holder``: the secret context sealed to each of ``to`` (whose sealing keys
        ``holder`` already received, :func:`sealing_directory.ensure`)."""
        exported = secret.secret_bytes()
        for pid in to:
            box = seal(
                sealing_directory.peer_public(call, holder, pid),
                exported,
                context=self._binding(call, holder, pid),
            )
            call.transport.send(
                Envelope(holder, (pid,), call.round, call.tag, box, stage=Stage.SECRET_CONTEXT, form=Form.KEYS)
            )

    def accept_secret(self, call: ExchangeCall, pid: str, holder: str, env: Envelope) -> None:
        """Acting as ``pid``: open the secret context ``holder`` sealed to it, and keep it."""
        if env.sender != holder or env.stage != Stage.SECRET_CONTEXT:
            raise MechanismError(f"{pid!r} expected a secret context from {holder!r}, got {env.stage!r} from {env.sender!r}")
        raw = sealing_directory.own_key(call, pid).open(env.payload, context=self._binding(call, holder, pid))
        self._put(call, pid, holder, SecretContext.from_secret_bytes(raw, preset=self.preset))

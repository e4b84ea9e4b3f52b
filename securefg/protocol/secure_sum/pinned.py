"""Malicious-server mode: the clients' pinned signing keys, what they sign, and where they come from.

Without pinned keys every public key of a secure-sum call reaches a client *through the
server*. A lying server can then hand client A a key of its own in place of B's (key
substitution): it learns the pairwise mask seed of A and B and, with the Shamir shares A
encrypts to "B", A's self-mask and mask key, so it opens A's input. The per-call signing keys
of the consistency check travel the same way, so the server can also forge every signature.

With ``pinned_keys`` (and ``signatures = true``) each client holds a static Ed25519 key whose
public half every party pinned before the run (the *directory*), as in the actively secure
protocol of Bonawitz et al., CCS 2017 (https://eprint.iacr.org/2017/281, Sec. 6: a PKI of
signing keys). Then:

* **AdvertiseKeys.** A client signs its per-call keys bound to the call and to the *client
  list* it was shown (:func:`key_message`); that pinned key is also its consistency-signing
  key. Every id the server lists must be pinned (no invented clients). A ``peer_sum`` target
  signs its end-to-end key the same way (:func:`aggregator_key_message`).
* **ShareKeys.** A client checks each neighbour's keys against the neighbour's pinned key and
  its *own* client list: a substituted key, or a neighbour shown another client list, is refused
  (:class:`~securefg.errors.KeySubstitutionError`). So every holder of a client's shares saw
  that client's list.
* **ConsistencyCheck / Unmask.** Clients sign (client list, survivor list)
  (:func:`consistency_message`). Before revealing any share a client needs valid signatures
  over exactly the lists it signed from more than :func:`witnesses` of the call's clients;
  a signature over another list, or too few, is refused
  (:class:`~securefg.errors.EquivocationError`). Two lists can both gather that many only if
  more than ``adversarial_rate * n`` clients sign both, i.e. are corrupt: a server alone cannot
  get one client's self-mask shares from some holders and its key shares from others.

**Where the directory comes from.** ``pinned_keys = "run"``: the run's own. In process the run
makes a key per client at set-up (:func:`provision_run`, called by the
:class:`~securefg.federation.federation.Federation`), as it makes the channel keys; a
``securefg party`` reads it from its ``--directory`` file (``securefg keys directory`` writes
each party's ``signing_key``, derived from its ``private.key``: :func:`identity_from_channel_key`).
A path: a directory file the user gives every party; each client's own key must match it.

**Not covered.** The server still chooses who is in a call and the neighbour graph (SecAgg+'s
random graph is the server's draw); it can drop clients, pick a small cohort (a sum of one
honest client and corrupt ones reveals that client's input, as without pinning), or corrupt the
sum it computes. Pinning authenticates clients to clients, not the server's arithmetic.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from securefg.errors import AuthenticationError, ConfigError
from securefg.protocol.secure_sum.constants import NAME, Domain
from securefg.protocol.secure_sum.crypto import KEY_BYTES, binding, hkdf_sha256

RUN = "run"
"""``pinned_keys = "run"``: the run's own directory (made at set-up, or ``securefg party --directory``)."""
STATE = "pinned"
IDENTITY = "identity"
"""Keys of a party's ``mech/secure_sum`` state: the directory, and its own 32-byte signing seed."""
_IDENTITY_INFO = b"securefg/secure_sum/v1/identity"


@dataclass(frozen=True)
class PinnedKeys:
    """The pinned Ed25519 public keys of a run's clients, and where they were read from."""

    keys: Mapping[str, bytes]
    source: str = "the run"

    def key_of(self, pid: str) -> bytes | None:
        return self.keys.get(pid)

    def verify(self, pid: str, signature: bytes, message: bytes) -> bool:
        """Whether ``signature`` is ``pid``'s, under its pinned key, over ``message``."""
        key = self.keys.get(pid)
        if key is None:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(key).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


# ----------------------------------------------------------------------------- messages
def list_digest(clients: Sequence[str]) -> str:
    """SHA-256 of the length-prefixed client list, as hex (what signatures bind it by)."""
    return hashlib.sha256(b"".join(len(c.encode()).to_bytes(4, "little") + c.encode() for c in clients)).hexdigest()


def key_message(info: Any, pid: str, clients: Sequence[str], c_pk: bytes, s_pk: bytes) -> bytes:
    """What ``pid`` signs over its per-call keys: the call, the client list it was shown, the keys."""
    return binding(Domain.KEY_SIGNATURE, info.session, info.round, info.tag, pid, list_digest(clients),
                   c_pk.hex(), s_pk.hex())


def aggregator_key_message(info: Any, aggregator: str, clients: Sequence[str], key: bytes) -> bytes:
    """What a ``peer_sum`` target signs over its end-to-end key (the relay cannot swap it)."""
    return binding(Domain.AGGREGATOR_KEY, info.session, info.round, info.tag, aggregator, list_digest(clients),
                   key.hex())


def consistency_message(info: Any, clients: Sequence[str], survivors: Sequence[str]) -> bytes:
    """What a client signs at ConsistencyCheck: the sorted survivor list, and with pinned keys
    the client list too (so a server cannot show two groups two consistent worlds)."""
    if info.pinned is None:
        return binding(Domain.CONSISTENCY, info.session, info.round, info.tag, *sorted(survivors))
    return binding(Domain.PINNED_CONSISTENCY, info.session, info.round, info.tag, list_digest(clients),
                   *sorted(survivors))


def witnesses(n: int, adversarial_rate: float) -> int:
    r"""Signers a client needs over its lists before it unmasks: :math:`\lfloor (1 + \gamma) n / 2 \rfloor + 1`
    (at most ``n``). Two such sets of the ``n`` clients share more than :math:`\gamma n` members."""
    return min(n, math.floor((1 + adversarial_rate) * n / 2) + 1)


# ----------------------------------------------------------------------------- directory
def identity_from_channel_key(raw: bytes) -> bytes:
    """A party's 32-byte signing seed, derived (HKDF-SHA256) from its 32-byte channel private key,
    so a site keeps one secret (``private.key``) and its ``public.json`` carries both public keys."""
    return hkdf_sha256(raw, info=_IDENTITY_INFO)


def public_of(seed: bytes) -> bytes:
    """The Ed25519 public key of a signing seed."""
    return Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()


def signing_keys_in(path: str | Path) -> dict[str, bytes]:
    """The signing keys of a directory file: ``{pid: {"public_key": hex, "signing_key": hex}}``
    (``securefg keys directory``); parties listed without a signing key are left out.

    Raises:
        ConfigError: Missing file, not JSON, or a malformed key.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"pinned_keys: no such directory file {path}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"pinned_keys: {path} is not JSON: {exc}") from exc
    except (OSError, ValueError) as exc:  # a folder, an unreadable file, a name the OS refuses
        raise ConfigError(f"pinned_keys: cannot read the directory file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"pinned_keys: {path} must map party ids to keys")
    keys = {}
    for pid, entry in data.items():
        value = entry.get("signing_key") if isinstance(entry, dict) else None
        if value is None:
            continue
        try:
            raw = bytes.fromhex(value) if isinstance(value, str) else b""
        except ValueError:
            raw = b""
        if len(raw) != KEY_BYTES:
            raise ConfigError(f"pinned_keys: {path} [{pid}]: a signing key must be 64 hex digits, got {value!r}")
        keys[str(pid)] = raw
    return keys


def read_directory(path: str | Path) -> PinnedKeys:
    """:func:`signing_keys_in` as pinned keys.

    Raises:
        ConfigError: As :func:`signing_keys_in`, or a file without any signing key.
    """
    keys = signing_keys_in(path)
    if not keys:
        raise ConfigError(f"pinned_keys: {path} holds no signing keys (a directory from before pinned keys: make "
                          "each party's public.json again with securefg keys new --force, then securefg keys directory)")
    return PinnedKeys(keys, str(path))


def provision(state: dict[str, Any], keys: PinnedKeys, seed: bytes | None = None) -> None:
    """Hand a party its pinned directory (and, for a client, its own signing seed), in its state."""
    mech = state.setdefault(f"mech/{NAME}", {})
    mech[STATE] = keys
    if seed is not None:
        mech[IDENTITY] = seed


def uses_run_directory(stack: Any) -> bool:
    """Whether some binding of ``stack`` asks for ``pinned_keys = "run"``."""
    return any(dict(b.params).get("pinned_keys") == RUN for b in getattr(stack, "bindings", ()))


def provision_run(parties: Mapping[str, Any]) -> PinnedKeys:
    """The run's directory in process: each client makes its own signing key (in its state); the
    set-up, as for the channel keys, collects the public halves and hands every party the copy."""
    import os

    seeds = {pid: os.urandom(KEY_BYTES) for pid in parties if pid.startswith("client/")}
    keys = PinnedKeys({pid: public_of(seed) for pid, seed in seeds.items()})
    for pid, party in parties.items():
        provision(party.state, keys, seeds.get(pid))
    return keys


_FILES: dict[str, PinnedKeys] = {}


def resolve(settings: Any, state: Mapping[str, Any], pid: str) -> tuple[PinnedKeys | None, Ed25519PrivateKey | None]:
    """This party's pinned directory and own signing key for a call under ``settings``.

    Raises:
        ConfigError: ``pinned_keys = "run"`` on a party given no directory.
        AuthenticationError: The directory pins another key for this party than the one it holds.
    """
    mode = getattr(settings, "pinned_keys", None)
    if mode is None:
        return None, None
    mech = state.get(f"mech/{NAME}", {})
    if mode == RUN:
        keys = mech.get(STATE)
        if keys is None:
            raise ConfigError(f"pinned_keys = \"run\": {pid} was given no pinned directory (in process the "
                              "Federation makes one; securefg party reads the --directory file)")
    else:
        keys = _FILES.get(mode) or _FILES.setdefault(mode, read_directory(mode))
    seed = mech.get(IDENTITY)
    identity = Ed25519PrivateKey.from_private_bytes(seed) if seed is not None else None
    if identity is not None and keys.key_of(pid) != identity.public_key().public_bytes_raw():
        raise AuthenticationError(f"{keys.source}: the pinned directory holds no key, or another key, for {pid!r} "
                                  "than its own signing key")
    return keys, identity


def validate(params: Mapping[str, Any]) -> list[str]:
    """Problems with ``pinned_keys``: not ``"run"`` or a readable directory file, or without signatures."""
    mode = params.get("pinned_keys")
    if mode is None:
        return []
    if not isinstance(mode, str) or not mode:
        return [f"'pinned_keys' must be \"{RUN}\" or the path of a directory file, got {mode!r}"]
    problems = []
    if params.get("signatures") is not True:
        problems.append("'pinned_keys' needs signatures = true: without the consistency check a server can still "
                        "tell clients different survivor lists")
    if mode != RUN:
        try:
            read_directory(mode)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems

"""What a party needs to run on its own host: its key pair, the pinned directory, the run file, TLS.

Nothing here is shared between hosts but public material:

* **Channel keys.** Each site makes its own X25519 key pair (:func:`new_keys`,
  ``securefg keys new``): ``private.key`` (32 raw bytes, mode 0600, never leaves the site) and
  ``public.json`` (``{"pid": ..., "public_key": hex, "signing_key": hex}``), the only file it
  hands out. ``signing_key`` is the public half of the party's secure-sum signing key, derived
  from ``private.key`` (:func:`~securefg.protocol.secure_sum.pinned.identity_from_channel_key`):
  what secure sums pin under ``pinned_keys`` (the malicious-server mode).
* **Directory.** The coordinator collects the ``public.json`` files into one directory file
  (:func:`build_directory`, ``securefg keys directory``), ``{pid: {"public_key": hex,
  "signing_key": hex}}`` (a plain ``{pid: hex}`` from older key files still loads, without
  signing keys); every party pins its own copy. A party whose own key is not in it stops
  (:func:`check_pinned`); the server refuses a client that presents another key
  (:meth:`FlowerServerRuntime.connect`); ``securefg party`` hands the signing keys to its
  secure sums (:func:`load_signing_keys`).
* **Run file.** A TOML file with the :class:`~securefg.experiment.RunConfig` fields and the
  run's session id in hex (:func:`write_run_file`, ``securefg config``); every party gets the
  same copy.
* **TLS.** A CA and a server certificate whose subject alternative names are the server's
  host names/addresses (:func:`make_certs`, ``securefg certs``). The server keeps
  ``server.key``; clients pin ``ca.pem``.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import json
import os
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import tomllib
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.errors import AuthenticationError, ConfigError, ServerUnreachableError
from securefg.federation.channel import ChannelIdentity
from securefg.toml_files import toml_value

PRIVATE_KEY = "private.key"
PUBLIC_KEY = "public.json"
DIRECTORY = "directory.json"
CA_CERT, SERVER_CERT, SERVER_KEY = "ca.pem", "server.pem", "server.key"
#: RunConfig fields a run file does not carry (they belong to one process, not to the run)
LOCAL_FIELDS = ("out", "resume", "checkpoint_every", "progress")


def _write_private(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 from the start (never world-readable, even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    path.chmod(0o600)


# ----------------------------------------------------------------------------- channel keys
def new_keys(pid: str, out: Path, *, force: bool = False) -> Path:
    """Make ``pid``'s channel key pair in ``out``: ``private.key`` (0600) and ``public.json``.

    Returns:
        Path: The ``public.json`` to hand to the coordinator.

    Raises:
        ConfigError: ``out`` already holds a private key (``force`` overwrites it).
    """
    if not pid or pid != pid.strip():
        raise ConfigError(f"a party id must be a non-empty name without surrounding spaces, got {pid!r}")
    out = Path(out)
    if (out / PRIVATE_KEY).exists() and not force:
        raise ConfigError(f"{out / PRIVATE_KEY} exists; refusing to overwrite a party's key (pass --force)")
    from securefg.protocol.secure_sum import pinned  # here: the package loads torch, a party's checks do not

    ident = ChannelIdentity(pid)
    raw = ident._private.private_bytes_raw()
    _write_private(out / PRIVATE_KEY, raw)
    public = out / PUBLIC_KEY
    signing = pinned.public_of(pinned.identity_from_channel_key(raw))
    public.write_text(json.dumps({"pid": pid, "public_key": ident.public_bytes.hex(), "signing_key": signing.hex()},
                                 indent=1) + "\n")
    return public


def _hex_key(value: Any, where: str) -> bytes:
    try:
        raw = bytes.fromhex(value) if isinstance(value, str) else b""
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise ConfigError(f"{where}: a public key must be 64 hex digits (32 bytes), got {value!r}")
    return raw


def _read_public_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such public key file") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("pid"), str) or not data["pid"]:
        raise ConfigError(f"{path}: expected {{\"pid\": ..., \"public_key\": hex}}")
    return data


def read_public(path: Path) -> tuple[str, bytes]:
    """``(pid, public key)`` from a ``public.json``.

    Raises:
        ConfigError: Missing, not JSON, or without a pid and a 32-byte hex key.
    """
    data = _read_public_json(path)
    return data["pid"], _hex_key(data.get("public_key"), str(path))


def read_signing_public(path: Path) -> bytes | None:
    """The secure-sum signing key of a ``public.json`` (``None`` in one made before them)."""
    value = _read_public_json(path).get("signing_key")
    return None if value is None else _hex_key(value, f"{path} [signing_key]")


def load_identity(keys: Path, pid: str) -> ChannelIdentity:
    """This party's key pair from its own key folder.

    Raises:
        ConfigError: No ``private.key`` there, a malformed one, or a ``public.json`` beside it
            naming another party or holding another key.
    """
    keys = Path(keys)
    path = keys / PRIVATE_KEY
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no private key for {pid!r} (make one with: securefg keys new --id {pid} "
                          f"--out {keys})") from exc
    if len(raw) != 32:
        raise ConfigError(f"{path}: a private key is 32 raw bytes, got {len(raw)}")
    ident = ChannelIdentity(pid, X25519PrivateKey.from_private_bytes(raw))
    if (keys / PUBLIC_KEY).exists():
        owner, public = read_public(keys / PUBLIC_KEY)
        if owner != pid:
            raise ConfigError(f"{keys}: this key folder belongs to {owner!r}, not {pid!r}")
        if public != ident.public_bytes:
            raise ConfigError(f"{keys / PUBLIC_KEY} does not hold the public half of {path}")
    return ident


def build_directory(public_files: Iterable[Path], out: Path) -> dict[str, str]:
    """The pinned directory ``{pid: hex}`` from the parties' ``public.json`` files, written to ``out``.

    Raises:
        ConfigError: Two files for the same party (with different keys), or a malformed file.
    """
    directory: dict[str, Any] = {}
    origin: dict[str, Path] = {}
    for path in public_files:
        pid, key = read_public(Path(path))
        signing = read_signing_public(Path(path))
        entry: Any = key.hex() if signing is None else {"public_key": key.hex(), "signing_key": signing.hex()}
        if pid in directory and directory[pid] != entry:
            raise ConfigError(f"two different keys for {pid!r}: {origin[pid]} and {path}")
        directory[pid], origin[pid] = entry, Path(path)
    if not directory:
        raise ConfigError("a directory needs at least one public.json")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(dict(sorted(directory.items())), indent=1) + "\n")
    return directory


def load_directory(path: Path) -> dict[str, bytes]:
    """A pinned directory file as ``{pid: public channel key}`` (entries ``hex`` or
    ``{"public_key": hex, ...}``).

    Raises:
        ConfigError: Missing, not JSON, or a key that is not 32 bytes of hex.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such directory file (the coordinator makes it with "
                          f"securefg keys directory; every party pins a copy)") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected {{pid: hex public key}}")
    return {str(pid): _hex_key(v.get("public_key") if isinstance(v, dict) else v, f"{path} [{pid}]")
            for pid, v in data.items()}


def load_signing_keys(path: Path) -> Any:
    """The secure-sum signing keys a directory file pins, as
    :class:`~securefg.protocol.secure_sum.pinned.PinnedKeys` (``None`` if it holds none).

    Raises:
        ConfigError: A malformed signing key.
    """
    from securefg.protocol.secure_sum import pinned

    keys = pinned.signing_keys_in(path)
    return pinned.PinnedKeys(keys, str(path)) if keys else None


def signing_seed(keys: Path) -> bytes:
    """This party's secure-sum signing seed, derived from its own ``private.key`` (never written).

    Raises:
        ConfigError: No (or a malformed) ``private.key`` in ``keys``.
    """
    path = Path(keys) / PRIVATE_KEY
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no private key") from exc
    if len(raw) != 32:
        raise ConfigError(f"{path}: a private key is 32 raw bytes, got {len(raw)}")
    from securefg.protocol.secure_sum import pinned

    return pinned.identity_from_channel_key(raw)


def check_pinned(identity: ChannelIdentity, directory: Mapping[str, bytes], path: Path | str) -> None:
    """Stop unless the pinned directory holds this party's own public key.

    Raises:
        AuthenticationError: The directory lacks the party, or holds another key for it.
    """
    pid = identity.pid
    if pid not in directory:
        raise AuthenticationError(f"{path}: the pinned directory has no key for {pid!r} "
                                  f"(it lists {sorted(directory)})")
    if directory[pid] != identity.public_bytes:
        raise AuthenticationError(
            f"{path}: the pinned directory holds another key for {pid!r} ({directory[pid].hex()[:16]}...) than "
            f"this party's private key ({identity.public_bytes.hex()[:16]}...); a key made after the directory "
            f"was built must be handed in again")


# ----------------------------------------------------------------------------- run file

def write_run_file(path: Path, cfg: Any, session: bytes | None = None) -> bytes:
    """Write ``cfg`` and the session id (fresh unless given) as a TOML run file; returns the session."""
    session = os.urandom(16) if session is None else session
    values = {k: v for k, v in asdict(cfg).items() if k not in LOCAL_FIELDS and v is not None}
    options = values.pop("options", {}) or {}
    lines = ["# securefg run file: every party of the run gets the same copy (securefg party --config)",
             f"session = {toml_value(session.hex())}"]
    lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
    if options:
        lines += ["", "[options]"] + [f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in options.items()]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n")
    return session


def read_run_table(path: Path) -> tuple[dict[str, Any], bytes]:
    """The run file's options (a dict, not yet checked against RunConfig) and its session id.

    Cheap (no torch): a party checks its files before it loads anything heavy.

    Raises:
        ConfigError: Missing file, bad TOML, or a missing/malformed session.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such run file (the coordinator writes it with securefg config)") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        session = bytes.fromhex(data.pop("session"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: needs session = \"<hex>\" (the run's session id)") from exc
    if len(session) < 16:
        raise ConfigError(f"{path}: the session id must be at least 16 bytes (32 hex digits)")
    return data, session


def run_config(data: dict[str, Any], path: Path | str) -> Any:
    """A :class:`~securefg.experiment.RunConfig` from a run file's options (``progress`` off).

    Raises:
        ConfigError: Unknown keys or invalid values (the message names ``path``).
    """
    from securefg.experiment import RunConfig

    known = {f.name for f in fields(RunConfig)} - set(LOCAL_FIELDS)
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {unknown} (known: session, {', '.join(sorted(known))})")
    data = dict(data)
    if data.get("split") is not None:
        data["split"] = tuple(data["split"])
    try:
        return RunConfig(**data, progress=False)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except TypeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def read_run_file(path: Path) -> tuple[Any, bytes]:
    """``(RunConfig, session)`` from a run file (``progress`` off, no ``out``).

    Raises:
        ConfigError: Missing file, bad TOML, unknown keys, or a missing/malformed session.
    """
    data, session = read_run_table(path)
    return run_config(data, path), session


# ----------------------------------------------------------------------------- TLS
def make_certs(out: Path, hosts: Iterable[str], *, days: int = 365) -> dict[str, Path]:
    """A CA and a server certificate for ``hosts`` (IP addresses or DNS names), in ``out``.

    Writes ``ca.pem`` (public: every client pins it), ``server.pem`` and ``server.key`` (0600,
    the server's alone). The CA's private key is not kept: make a new set for new hosts.

    Raises:
        ConfigError: No host given.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    hosts = [h for h in hosts if h]
    if not hosts:
        raise ConfigError("certs need at least one --host (the name or address clients dial)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    now = _dt.datetime.now(_dt.timezone.utc) - _dt.timedelta(minutes=5)
    until = now + _dt.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "securefg run CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(until)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": out / CA_CERT, "cert": out / SERVER_CERT, "key": out / SERVER_KEY}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_private(paths["key"], key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
    return paths


def read_pem(path: Path, what: str) -> bytes:
    """A PEM file's bytes, or a ConfigError saying which file is missing and what it is for."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no {what} (make the TLS files with securefg certs, or pass --insecure "
                          f"on a trusted loopback)") from exc


# ----------------------------------------------------------------------------- reaching the server
def split_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) as ``(host, port)``.

    Raises:
        ConfigError: No port.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def wait_for_server(address: str, timeout: float) -> None:
    """Poll ``address`` until it accepts a TCP connection (every 0.2 s), at most ``timeout`` seconds.

    Raises:
        ServerUnreachableError: Nothing accepted a connection in time.
    """
    host, port = split_address(address)
    deadline = time.monotonic() + timeout
    last: OSError | None = None
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(2.0, deadline - time.monotonic()))):
                return
        except OSError as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise ServerUnreachableError(f"no securefg server answered at {address} within {timeout:g} s "
                                         f"(last error: {last}); is it started, and is the port open?")
        time.sleep(0.2)

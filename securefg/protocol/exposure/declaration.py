"""Who reads a tag's payload, and in what form: each mechanism's exposure declaration.

An envelope's :class:`~securefg.federation.envelope.Form` says what its receiver holds on the
wire, not who finally *reads* the payload. A sealed box is read by the party it is sealed to:
under ``mailbox`` the shuffler receives onions it cannot open while the server opens the
shuffled inner boxes it gets from the shuffler, both ``sealed`` on the wire. A masked input is
read, as a sum, by whoever collects the unmasking shares; a CKKS ciphertext by the holder of the
secret key. Guessing this from the wire forms made the exposure ledger say that the shuffler
read FedSheafHN's embeddings and the server read nothing, the opposite of the truth (issue 38).

So each mechanism *declares*, per exchange kind it carries, the form in which each party role
reads the tag's payload: ``plaintext`` (each individual value), ``aggregate`` (only a sum or
another combination of several values, or its own personal combination) or a protected form
(``masked``, ``ciphertext``, ``sealed``, ``keys``: it holds those bytes and reads nothing). A
role the declaration leaves out receives nothing of the tag. The audit's ledger
(:func:`securefg.audit.ledger.exposure_ledger`) is built from these declarations and the
run's transcript; ``tests/audit/test_exposure_agreement.py`` checks them against the transcript of a
one-round run of every shipped stack and method, and against each stack's description.

Roles: ``server``, ``client`` (every client taking part), ``keyholder`` (the CKKS key holder:
the ``keyholder`` party when the run has one, else the ``key_holder`` parameter or the
lowest-numbered client, as :class:`~securefg.protocol.ckks.key_setup.CKKSKeySetup` decides) and
``shuffler``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from securefg.errors import ConfigError
from securefg.federation.envelope import Form
from securefg.federation.party import KEY_AUTHORITY, SERVER, SHUFFLER, client_index, is_client
from securefg.protocol.mechanism import ExchangeKind, mechanism_class

ROLE_SERVER = "server"
ROLE_CLIENT = "client"
ROLE_KEYHOLDER = "keyholder"
ROLE_SHUFFLER = "shuffler"
ROLES = (ROLE_SERVER, ROLE_CLIENT, ROLE_KEYHOLDER, ROLE_SHUFFLER)

#: Forms in which a role reads the payload (every other form: it holds protected bytes only).
READS = frozenset({Form.PLAINTEXT, Form.AGGREGATE})

Exposure = Mapping[str, Form]
"""Role -> the form in which it reads (or only holds) the tag's payload."""

Declaration = Callable[[ExchangeKind, Mapping[str, Any]], Exposure]
"""``(exchange kind, the binding's parameters with the mechanism's defaults) -> exposure``."""

_DECLARATIONS: dict[str, Declaration] = {}


def declare_exposure(mechanism: str) -> Callable[[Declaration], Declaration]:
    """Register the exposure declaration of ``mechanism`` (a decorator, as ``register_mechanism``).

    Raises:
        ValueError: ``mechanism`` already has a declaration.
    """

    def register(fn: Declaration) -> Declaration:
        if mechanism in _DECLARATIONS and _DECLARATIONS[mechanism] is not fn:
            raise ValueError(f"mechanism {mechanism!r} already declares its exposure")
        _DECLARATIONS[mechanism] = fn
        return fn

    return register


def unsupported(mechanism: str, kind: ExchangeKind) -> ConfigError:
    """The error a declaration raises for an exchange kind its mechanism does not carry."""
    return ConfigError(f"mechanism {mechanism!r} does not carry exchange {kind.value!r}, so it declares no "
                       "exposure for it")


def _load_builtins() -> None:
    import securefg.protocol.exposure.builtin  # noqa: F401  (registers on import)


def declared_mechanisms() -> frozenset[str]:
    """Names of the mechanisms that declare their exposure."""
    _load_builtins()
    return frozenset(_DECLARATIONS)


def exposure_of(mechanism: str, kind: ExchangeKind, params: Mapping[str, Any] | None = None) -> dict[str, Form]:
    """What each role reads of a tag bound to ``mechanism`` with ``params`` and carried as ``kind``.

    Raises:
        ConfigError: The mechanism declares no exposure (a stack using it cannot be audited),
            does not carry ``kind``, or its declaration names an unknown role.
    """
    _load_builtins()
    declare = _DECLARATIONS.get(mechanism)
    if declare is None:
        raise ConfigError(f"mechanism {mechanism!r} declares no exposure, so no ledger can say who reads its "
                          f"tags; declare one with securefg.protocol.exposure.declare_exposure (declared: "
                          f"{sorted(_DECLARATIONS)})")
    try:
        defaults: Mapping[str, Any] = mechanism_class(mechanism).defaults
    except ConfigError:  # declared but not registered in this process (e.g. an attacks-only defence)
        defaults = {}
    out = dict(declare(kind, {**defaults, **dict(params or {})}))
    unknown = sorted(set(out) - set(ROLES))
    if unknown:
        raise ConfigError(f"the exposure of {mechanism!r} names unknown roles {unknown} (roles: {list(ROLES)})")
    return out


def key_holder(parties: Collection[str], params: Mapping[str, Any]) -> str | None:
    """The CKKS key holder among ``parties``, decided as the CKKS key setup does."""
    if KEY_AUTHORITY in parties:
        return KEY_AUTHORITY
    named = params.get("key_holder")
    if isinstance(named, str):
        return named
    clients = sorted((p for p in parties if is_client(p)), key=client_index)
    return clients[0] if clients else None


def roles_of(party: str, *, parties: Collection[str], params: Mapping[str, Any]) -> frozenset[str]:
    """The roles ``party`` plays in a run of ``parties`` (a client may also hold the CKKS key)."""
    roles: set[str] = set()
    if party == SERVER:
        roles.add(ROLE_SERVER)
    elif party == SHUFFLER:
        roles.add(ROLE_SHUFFLER)
    elif is_client(party):
        roles.add(ROLE_CLIENT)
    if party == key_holder(parties, params):
        roles.add(ROLE_KEYHOLDER)
    return frozenset(roles)


def reading(exposure: Exposure, roles: Iterable[str]) -> Form | None:
    """The most revealing form among ``roles``' entries (``None``: they receive nothing).

    ``plaintext`` beats ``aggregate``, which beats every protected form.
    """
    forms = [exposure[r] for r in roles if r in exposure]
    for best in (Form.PLAINTEXT, Form.AGGREGATE):
        if best in forms:
            return best
    return forms[0] if forms else None


def reading_roles(exposure: Exposure, roles: Iterable[str]) -> frozenset[str]:
    """Which of ``roles`` read the payload (``plaintext`` or ``aggregate``) under ``exposure``."""
    return frozenset(r for r in roles if exposure.get(r) in READS)


__all__ = ["READS", "ROLES", "ROLE_CLIENT", "ROLE_KEYHOLDER", "ROLE_SERVER", "ROLE_SHUFFLER", "Declaration",
           "Exposure", "declare_exposure", "declared_mechanisms", "exposure_of", "key_holder", "reading",
           "reading_roles", "roles_of", "unsupported"]

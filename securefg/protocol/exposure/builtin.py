"""Exposure declarations of the built-in mechanisms (and of the audit's trimmed-mean defence).

Each entry follows the envelopes its mechanism's code sends (the stage and ``Form`` of every
envelope; the modules named below document them) and says who ends up reading the payload:

* ``plaintext`` (:mod:`securefg.protocol.plaintext`): every receiver reads what it gets; a
  personalized or shared sum's receivers read only their combination.
* ``secure_sum`` (:mod:`securefg.protocol.secure_sum`): the aggregator (the server, or the
  ``peer_sum`` target) collects the masked inputs and the unmasking shares and reads the sum;
  everyone else holds masked vectors and key material. ``shared_sum`` sends the server's sum on
  to the clients in the clear.
* ``blind_sum``: as ``secure_sum``, but the server's sum is blinded under a group key only the
  clients hold; the clients unblind it.
* ``ckks`` (:mod:`securefg.protocol.ckks`): the server computes on ciphertexts; the key holder
  decrypts the aggregate (or the shuffled cosines) and hands it to the server; a personalized
  aggregate is decrypted by its one receiving client, which holds the key.
* ``ckks_relay``, ``sealed_relay`` (:mod:`securefg.protocol.relay`): the server (and a shuffler)
  forward ciphertexts or sealed boxes; each recipient client opens what reaches it.
* ``mailbox`` (:mod:`securefg.protocol.relay.mailbox`): ``collect``: the shuffler peels onions
  whose inner boxes are sealed to the server, which opens every payload under a pseudonym;
  ``reply``: the server seals each output to its pseudonym's key, the shuffler forwards it and
  only the owning client opens it.
* ``subgroup_robust``: the server reads each subgroup's sum as its inner mechanism releases it.
* ``ckks_robust`` (:mod:`securefg.protocol.robust.ckks_robust`): the server computes on
  ciphertexts and reads the robust sum and the rule's coefficients; the key holder reads the
  pseudonymous inner products and the sum.
* ``masked_robust`` (:mod:`securefg.protocol.robust.masked_robust`): the server computes on
  sketch ciphertexts, reads the kept clients' masked sum and the rule's coefficients; the key
  holder reads the pseudonymous inner products and the sketch of the sum.
* ``blind_robust`` (:mod:`securefg.protocol.robust.blind_robust`): the server computes on sketch
  ciphertexts and holds the kept clients' sum blinded; the key holder reads the pseudonymous inner
  products and the sketch of the sum, which it seals to the clients; the clients unblind the sum.
* ``plaintext_trimmed_mean`` (:mod:`securefg.attacks.defences`), ``plaintext_krum``
  (:mod:`securefg.protocol.robust.plaintext_krum`): the server reads every input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from securefg.federation.envelope import Form
from securefg.protocol.exposure.declaration import (
    ROLE_CLIENT,
    ROLE_KEYHOLDER,
    ROLE_SERVER,
    ROLE_SHUFFLER,
    Exposure,
    declare_exposure,
    exposure_of,
    unsupported,
)
from securefg.protocol.mechanism import ExchangeKind

K = ExchangeKind
PLAIN, AGG = Form.PLAINTEXT, Form.AGGREGATE


@declare_exposure("plaintext")
def plaintext(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """Every receiver reads; the server reads each input of every upload."""
    table: dict[ExchangeKind, Exposure] = {
        K.BROADCAST: {ROLE_CLIENT: PLAIN},
        K.SEND: {ROLE_SERVER: PLAIN, ROLE_CLIENT: PLAIN},
        K.AGGREGATE: {ROLE_SERVER: PLAIN},
        K.SIMILARITY: {ROLE_SERVER: PLAIN},
        K.COLLECT: {ROLE_SERVER: PLAIN},
        K.REPLY: {ROLE_CLIENT: PLAIN},
        K.RELAY: {ROLE_SERVER: PLAIN, ROLE_CLIENT: PLAIN},
        K.PEER_SUM: {ROLE_CLIENT: PLAIN},  # the target receives each peer's input
        K.SHARED_SUM: {ROLE_SERVER: PLAIN, ROLE_CLIENT: AGG},
        K.PERSONALIZED_AGGREGATE: {ROLE_SERVER: PLAIN, ROLE_CLIENT: AGG},
    }
    if kind not in table:
        raise unsupported("plaintext", kind)
    return table[kind]


@declare_exposure("secure_sum")
def secure_sum(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The aggregator reads the sum; every other party holds masked vectors and key material."""
    if kind is K.AGGREGATE:
        return {ROLE_SERVER: AGG, ROLE_CLIENT: Form.MASKED}
    if kind is K.PEER_SUM:  # every client is the target of its own sum; the server only relays
        return {ROLE_CLIENT: AGG, ROLE_SERVER: Form.MASKED}
    if kind is K.SHARED_SUM:
        return {ROLE_SERVER: AGG, ROLE_CLIENT: AGG}
    raise unsupported("secure_sum", kind)


@declare_exposure("blind_sum")
def blind_sum(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The clients unblind the sum; the server holds it blinded under their group key."""
    if kind is K.SHARED_SUM:
        return {ROLE_SERVER: Form.MASKED, ROLE_CLIENT: AGG}
    raise unsupported("blind_sum", kind)


@declare_exposure("ckks")
def ckks(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The key holder decrypts aggregates and cosines for the server; a client its own mix."""
    if kind in (K.AGGREGATE, K.SIMILARITY):
        return {ROLE_SERVER: AGG, ROLE_KEYHOLDER: AGG, ROLE_CLIENT: Form.KEYS}
    if kind is K.PERSONALIZED_AGGREGATE:
        return {ROLE_CLIENT: AGG, ROLE_SERVER: Form.CIPHERTEXT, ROLE_KEYHOLDER: Form.KEYS}
    raise unsupported("ckks", kind)


@declare_exposure("ckks_relay")
def ckks_relay(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """Recipient clients hold the key and decrypt; the server forwards ciphertexts."""
    if kind is K.RELAY:
        return {ROLE_CLIENT: PLAIN, ROLE_SERVER: Form.CIPHERTEXT, ROLE_KEYHOLDER: Form.KEYS}
    raise unsupported("ckks_relay", kind)


@declare_exposure("sealed_relay")
def sealed_relay(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """Recipient clients open their boxes; the server (and a shuffler) forward them sealed."""
    if kind is K.RELAY:
        return {ROLE_CLIENT: PLAIN, ROLE_SERVER: Form.SEALED, ROLE_SHUFFLER: Form.SEALED}
    raise unsupported("sealed_relay", kind)


@declare_exposure("mailbox")
def mailbox(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The server reads every upload under a pseudonym; the shuffler reads nothing."""
    if kind is K.COLLECT:
        return {ROLE_SERVER: PLAIN, ROLE_SHUFFLER: Form.SEALED, ROLE_CLIENT: Form.KEYS}
    if kind is K.REPLY:
        return {ROLE_CLIENT: PLAIN, ROLE_SHUFFLER: Form.SEALED}
    raise unsupported("mailbox", kind)


@declare_exposure("subgroup_robust")
def subgroup_robust(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The server reads what the inner mechanism releases of each subgroup, then combines it."""
    if kind not in (K.AGGREGATE, K.SHARED_SUM):
        raise unsupported("subgroup_robust", kind)
    inner = exposure_of(str(params.get("inner", "secure_sum")), K.AGGREGATE, dict(params.get("inner_params", {})))
    if kind is K.SHARED_SUM:
        return {**inner, ROLE_CLIENT: AGG}  # the robust result goes to every client (Form.AGGREGATE)
    return inner


@declare_exposure("ckks_robust")
def ckks_robust(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The key holder judges inner products and decrypts the kept sum for the server."""
    if kind is K.AGGREGATE:
        return {ROLE_SERVER: AGG, ROLE_KEYHOLDER: AGG, ROLE_CLIENT: Form.KEYS}
    if kind is K.SHARED_SUM:  # the robust result goes on to every client
        return {ROLE_SERVER: AGG, ROLE_KEYHOLDER: AGG, ROLE_CLIENT: AGG}
    raise unsupported("ckks_robust", kind)


@declare_exposure("masked_robust")
def masked_robust(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The key holder judges sketch inner products; the kept clients' masked sum goes to the server."""
    if kind is K.AGGREGATE:
        return {ROLE_SERVER: AGG, ROLE_KEYHOLDER: AGG, ROLE_CLIENT: Form.KEYS}
    if kind is K.SHARED_SUM:  # the robust result goes on to every client
        return {ROLE_SERVER: AGG, ROLE_KEYHOLDER: AGG, ROLE_CLIENT: AGG}
    raise unsupported("masked_robust", kind)


@declare_exposure("blind_robust")
def blind_robust(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The key holder judges sketch inner products; the clients read the kept sum; the server holds it blinded."""
    if kind is K.SHARED_SUM:
        return {ROLE_SERVER: Form.MASKED, ROLE_KEYHOLDER: AGG, ROLE_CLIENT: AGG}
    raise unsupported("blind_robust", kind)


@declare_exposure("plaintext_krum")
def plaintext_krum(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The server needs every input's sketch to judge them; it reads the inputs."""
    if kind is K.AGGREGATE:
        return {ROLE_SERVER: PLAIN}
    if kind is K.SHARED_SUM:
        return {ROLE_SERVER: PLAIN, ROLE_CLIENT: AGG}
    raise unsupported("plaintext_krum", kind)


@declare_exposure("plaintext_trimmed_mean")
def plaintext_trimmed_mean(kind: ExchangeKind, params: Mapping[str, Any]) -> Exposure:
    """The server needs every input on its own to trim them."""
    if kind is K.AGGREGATE:
        return {ROLE_SERVER: PLAIN}
    raise unsupported("plaintext_trimmed_mean", kind)


__all__ = [
    "blind_robust",
    "blind_sum",
    "ckks",
    "ckks_relay",
    "ckks_robust",
    "mailbox",
    "masked_robust",
    "plaintext",
    "plaintext_krum",
    "plaintext_trimmed_mean",
    "sealed_relay",
    "secure_sum",
    "subgroup_robust",
]

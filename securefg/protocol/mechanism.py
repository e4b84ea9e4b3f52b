"""Base classes and registry of protection mechanisms.

A method asks for an *exchange* (``aggregate``, ``relay``, ...) under a message *tag*; the
protocol stack picks the *mechanism* that carries it. Each mechanism implements one or more
exchanges by sending envelopes of bytes through the transport and reading them back as the
receiving party. Mechanisms are registered by name per exchange, as Opacus registers
accountants, so a stack file can name them and an unknown name lists the choices.

Conventions every mechanism follows:

* Code acting *as* a party touches only that party's :class:`~securefg.federation.party.Party`
  state (``call.parties[pid].state``), under the key ``f"mech/{name}"``.
* Values cross parties only as envelopes through ``call.transport``; the return value of
  ``run`` is exactly what the receiving party decoded from its envelopes.
* Vectors handed to ``aggregate``/``peer_sum``/``personalized_aggregate``/``similarity`` are
  1-D ``float64`` CPU tensors; the exchange layer flattens and unflattens named tensors.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import torch

from securefg.errors import ConfigError
from securefg.federation.party import SERVER, Party
from securefg.federation.transport import InProcessTransport
from securefg.protocol.guarantees import Voided


class ExchangeKind(str, enum.Enum):
    """The collective operations methods are written against (ARCHITECTURE.md)."""

    BROADCAST = "broadcast"
    SEND = "send"
    AGGREGATE = "aggregate"
    PERSONALIZED_AGGREGATE = "personalized_aggregate"
    SIMILARITY = "similarity"
    RELAY = "relay"
    PEER_SUM = "peer_sum"
    #: Clients -> server, each input under a pseudonym (the server needs individual inputs
    #: but not who sent them; FedSheafHN's embeddings and hypernetwork feedback).
    COLLECT = "collect"
    #: Server -> the owner of each pseudonym (FedSheafHN's generated weights).
    REPLY = "reply"
    #: Clients -> server -> every client: each client learns Σ inputs ("aggregate, then
    #: broadcast back"). Whether the server learns the sum too is the mechanism's choice:
    #: ``secure_sum`` hands it the sum, ``blind_sum`` only a sum blinded under a client-held key.
    SHARED_SUM = "shared_sum"


@dataclass
class ExchangeCall:
    """Everything a mechanism needs for one exchange call.

    Args:
        transport: The network.
        parties: Every party's private state, by id (a mechanism acts *as* one at a time).
        round: Current round.
        tag: The method's message tag.
        params: Mechanism parameters from the protocol stack binding.
        server: Id of the server party.
        rng: Seeded generator for non-cryptographic randomness (e.g. test dropouts).
        dropouts: Stage name -> party ids that drop out at that stage (simulation).
        count_tail: ``aggregate`` only: how many trailing entries of each vector are counts
            (side inputs, then the weight) that a robust rule must sum, not robustify.
        weighted: ``aggregate`` only: the last entry of each vector is the client's weight.
    """

    transport: InProcessTransport
    parties: Mapping[str, Party]
    round: int
    tag: str
    params: Mapping[str, Any] = field(default_factory=dict)
    server: str = SERVER
    rng: torch.Generator | None = None
    dropouts: Mapping[str, frozenset[str]] = field(default_factory=dict)
    kind: ExchangeKind | None = None
    count_tail: int = 0
    weighted: bool = False

    def state_of(self, pid: str, mechanism: str) -> dict[str, Any]:
        """The namespaced private state of ``pid`` for ``mechanism`` (created on first use)."""
        return self.parties[pid].state.setdefault(f"mech/{mechanism}", {})

    def drops_at(self, stage: str) -> frozenset[str]:
        return self.dropouts.get(stage, frozenset())


@dataclass(frozen=True)
class SumOutcome:
    """What the receiver of a sum learns: the total and who contributed to it."""

    total: torch.Tensor
    contributors: tuple[str, ...]


class Mechanism(abc.ABC):
    """A protection mechanism: carries one or more exchange kinds.

    Subclasses set ``name`` and ``exchanges`` and implement the matching ``run_*`` methods.
    ``params`` come from the protocol stack and are validated by :meth:`validate_params`.
    """

    name: ClassVar[str]
    exchanges: ClassVar[frozenset[ExchangeKind]]
    #: Parameters accepted from the stack, with defaults.
    defaults: ClassVar[Mapping[str, Any]] = {}
    #: Form of the payloads receivers see (for the exposure ledger / docs).
    protects: ClassVar[str] = ""
    #: Whether the receiver sees each input on its own (robust aggregation needs this).
    reveals_individual_inputs: ClassVar[bool] = False
    #: Whether ``run_aggregate`` returns the sum of its inputs (a robust statistic does not).
    returns_sum: ClassVar[bool] = True

    def __init__(self, **params: Any) -> None:
        problems = self.validate_params(params)
        if problems:
            raise ConfigError(
                f"invalid parameters for mechanism {self.name!r}:\n"
                + "\n".join(f"- {p}" for p in problems)
            )
        self.params: dict[str, Any] = {**self.defaults, **params}

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        """Return one message per problem (unknown keys by default)."""
        unknown = set(params) - set(cls.defaults)
        return [
            f"unknown parameter {k!r} (known: {sorted(cls.defaults) or 'none'})"
            for k in sorted(unknown)
        ]

    @classmethod
    def voided_guarantees(cls, params: Mapping[str, Any]) -> list[Voided]:
        """Valid settings in ``params`` that void what this mechanism protects (none by default).

        The stack refuses each at load unless the binding is marked ``unsafe``
        (:mod:`securefg.protocol.guarantees`). Called only on parameters that passed
        :meth:`validate_params`.
        """
        return []

    # Each exchange kind; the base rejects what a mechanism does not implement.
    def run_broadcast(self, call: ExchangeCall, payload: bytes, receivers: Sequence[str]) -> dict[str, bytes]:
        raise self._unsupported(ExchangeKind.BROADCAST)

    def run_send(self, call: ExchangeCall, payload: bytes, sender: str, receiver: str) -> bytes:
        raise self._unsupported(ExchangeKind.SEND)

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        """Server learns only Σ inputs (over the clients that survive)."""
        raise self._unsupported(ExchangeKind.AGGREGATE)

    def run_peer_sum(
        self, call: ExchangeCall, target: str, inputs: Mapping[str, torch.Tensor]
    ) -> SumOutcome:
        """``target`` learns only Σ inputs of its peers."""
        raise self._unsupported(ExchangeKind.PEER_SUM)

    def run_personalized_aggregate(
        self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor], coefficients: Mapping[str, Mapping[str, float]]
    ) -> dict[str, torch.Tensor]:
        """Client i learns Σ_j coefficients[i][j] · inputs[j] and nothing else."""
        raise self._unsupported(ExchangeKind.PERSONALIZED_AGGREGATE)

    def run_similarity(
        self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor], metric: str
    ) -> dict[tuple[str, str], float]:
        """Server learns the pairwise similarity of the inputs (``cosine`` or ``dot``)."""
        raise self._unsupported(ExchangeKind.SIMILARITY)

    def run_relay(
        self, call: ExchangeCall, items: Mapping[str, bytes], *, exclude_self: bool, shuffle: bool
    ) -> dict[str, list[bytes]]:
        """Each client receives the other clients' items through the server."""
        raise self._unsupported(ExchangeKind.RELAY)

    def run_collect(self, call: ExchangeCall, inputs: Mapping[str, bytes]) -> dict[str, bytes]:
        """Server learns every input, keyed by a pseudonym (which may be the sender's id)."""
        raise self._unsupported(ExchangeKind.COLLECT)

    def run_reply(self, call: ExchangeCall, outputs: Mapping[str, bytes]) -> dict[str, bytes]:
        """The owner of each pseudonym (from :meth:`run_collect`) receives its output; returns
        ``{client id: what it decoded}``."""
        raise self._unsupported(ExchangeKind.REPLY)

    def run_shared_sum(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> dict[str, SumOutcome]:
        """Every reachable input client learns Σ inputs (over the survivors); returns
        ``{client id: what it decoded}``."""
        raise self._unsupported(ExchangeKind.SHARED_SUM)

    def _unsupported(self, kind: ExchangeKind) -> ConfigError:
        return ConfigError(
            f"mechanism {self.name!r} does not implement exchange {kind.value!r}; "
            f"choices for {kind.value!r}: {sorted(mechanisms_for(kind))}"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.params.items())})"


class Transform(abc.ABC):
    """A pre/post-processing layer on a vector exchange (DP noise, clipping).

    ``client`` runs as each client on its own vector before the mechanism; ``server`` runs on
    the receiver's result. Registered by name like mechanisms.
    """

    name: ClassVar[str]
    defaults: ClassVar[Mapping[str, Any]] = {}
    #: Whether the transform must see every input on its own (robust aggregation).
    needs_individual_inputs: ClassVar[bool] = False

    def __init__(self, **params: Any) -> None:
        unknown = set(params) - set(self.defaults)
        if unknown:
            raise ConfigError(
                f"unknown parameter(s) {sorted(unknown)} for transform {self.name!r} "
                f"(known: {sorted(self.defaults)})"
            )
        self.params: dict[str, Any] = {**self.defaults, **params}

    @classmethod
    def voided_guarantees(cls, params: Mapping[str, Any]) -> list[Voided]:
        """Valid settings in ``params`` that void what this transform promises (none by default).

        As :meth:`Mechanism.voided_guarantees`; ``params`` hold only known keys.
        """
        return []

    def client(self, call: ExchangeCall, pid: str, vector: torch.Tensor) -> torch.Tensor:
        return vector

    def server(self, call: ExchangeCall, total: torch.Tensor, contributors: Sequence[str]) -> torch.Tensor:
        return total


_MECHANISMS: dict[str, type[Mechanism]] = {}
_TRANSFORMS: dict[str, type[Transform]] = {}

M = TypeVar("M", bound=type[Mechanism])
T = TypeVar("T", bound=type[Transform])


def register_mechanism(cls: M) -> M:
    """Class decorator: make a mechanism available to protocol stacks by its ``name``."""
    if cls.name in _MECHANISMS and _MECHANISMS[cls.name] is not cls:
        raise ValueError(f"mechanism name {cls.name!r} is already registered")
    _MECHANISMS[cls.name] = cls
    return cls


def register_transform(cls: T) -> T:
    """Class decorator: make a transform available to protocol stacks by its ``name``."""
    if cls.name in _TRANSFORMS and _TRANSFORMS[cls.name] is not cls:
        raise ValueError(f"transform name {cls.name!r} is already registered")
    _TRANSFORMS[cls.name] = cls
    return cls


def _load_builtins() -> None:
    # Importing registers; kept lazy to avoid import cycles.
    import securefg.protocol.builtins  # noqa: F401


def mechanism_class(name: str) -> type[Mechanism]:
    _load_builtins()
    if name not in _MECHANISMS:
        raise ConfigError(f"Could not resolve mechanism {name!r} among choices {sorted(_MECHANISMS)}")
    return _MECHANISMS[name]


def transform_class(name: str) -> type[Transform]:
    _load_builtins()
    if name not in _TRANSFORMS:
        raise ConfigError(f"Could not resolve transform {name!r} among choices {sorted(_TRANSFORMS)}")
    return _TRANSFORMS[name]


def mechanisms_for(kind: ExchangeKind) -> set[str]:
    _load_builtins()
    return {n for n, c in _MECHANISMS.items() if kind in c.exchanges}


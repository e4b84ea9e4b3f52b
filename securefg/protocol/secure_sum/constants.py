"""Stage names, message keys and reason enums of the secure sum, in one place.

Shaped like Flower's ``secaggplus_constants.py`` (``Stage``, ``Key``) and fcp's
``secagg_server_enums.proto`` (``ClientDropReason``). Every envelope of the protocol carries one
:class:`Stage` value as its ``stage``; ``call.dropouts`` is keyed by the same values.
"""

from __future__ import annotations

import enum

NAME = "secure_sum"
"""Registered mechanism name, also the namespace of per-party state (``mech/secure_sum``)."""

PROTOCOL_VERSION = 1


class Stage(str, enum.Enum):
    """Protocol stages, in order. Each value is the ``stage`` of that stage's envelopes."""

    ADVERTISE_KEYS = "secure_sum/advertise_keys"
    SHARE_KEYS = "secure_sum/share_keys"
    MASKED_INPUT = "secure_sum/masked_input"
    CONSISTENCY_CHECK = "secure_sum/consistency_check"
    UNMASK = "secure_sum/unmask"

    @classmethod
    def ordered(cls, *, signatures: bool) -> tuple[Stage, ...]:
        """The stages a round runs, with or without the consistency check."""
        stages = tuple(cls)
        return stages if signatures else tuple(s for s in stages if s is not cls.CONSISTENCY_CHECK)


class Domain(bytes, enum.Enum):
    """Domain-separation labels, first field of every HKDF ``info`` and signed message."""

    PAIRWISE_MASK = b"securefg/secure_sum/v1/pairwise-mask"
    SHARE_AEAD = b"securefg/secure_sum/v1/share-aead"
    END_TO_END = b"securefg/secure_sum/v1/end-to-end"
    CONSISTENCY = b"securefg/secure_sum/v1/consistency"
    GROUP_KEY = b"securefg/secure_sum/v1/group-key"
    BLINDING = b"securefg/secure_sum/v1/blinding"
    KEY_SIGNATURE = b"securefg/secure_sum/v1/key-signature"
    """Pinned keys: a client's signature over its per-call public keys."""
    AGGREGATOR_KEY = b"securefg/secure_sum/v1/aggregator-key"
    """Pinned keys: a ``peer_sum`` target's signature over its end-to-end key."""
    PINNED_CONSISTENCY = b"securefg/secure_sum/v1/pinned-consistency"
    """Pinned keys: the survivor list signed together with the call's client list."""


class ShareKind(int, enum.Enum):
    """Which secret of a peer an unmasking share opens. A client reveals one kind per peer."""

    SELF_MASK = 1
    """A share of the peer's self-mask seed ``b``: the peer's masked input reached the server."""
    S_KEY = 2
    """A share of the peer's mask-key secret ``s_sk``: the peer dropped before its masked input."""


class ClientDropReason(str, enum.Enum):
    """Why the aggregator stopped counting a client in a round."""

    NO_RESPONSE = "no_response"
    """The client did not answer a stage's request (a dropout)."""
    MALFORMED_MESSAGE = "malformed_message"
    """The client's message failed to parse, had the wrong shape, or failed authentication."""
    DUPLICATE_KEY = "duplicate_key"
    """The client advertised a public key some other client (or itself) already uses."""
    INVALID_SHARE_TARGETS = "invalid_share_targets"
    """The client's shares were not addressed to exactly its live neighbours."""
    INVALID_UNMASK_RESPONSE = "invalid_unmask_response"
    """The client's unmasking shares did not answer exactly what was asked."""
    INVALID_SIGNATURE = "invalid_signature"
    """The client's consistency-check signature did not verify."""
    TOO_FEW_NEIGHBOURS = "too_few_neighbours"
    """Fewer than ``t`` of the client's neighbours are live, so it could not proceed."""


class AbortReason(str, enum.Enum):
    """Why a client refused a server claim (carried by :class:`InvalidClaimError`)."""

    MALFORMED_CLAIM = "malformed_claim"
    DUPLICATE_ID = "duplicate_id"
    UNKNOWN_ID = "unknown_id"
    SELF_LISTED_AS_PEER = "self_listed_as_peer"
    SELF_LISTED_AS_DEAD = "self_listed_as_dead"
    DEAD_AND_ALIVE = "dead_and_alive"
    ALREADY_DEAD = "already_dead"
    UNACCOUNTED_PEER = "unaccounted_peer"
    NOT_A_NEIGHBOUR = "not_a_neighbour"
    DUPLICATE_KEY = "duplicate_key"
    CONFIG_MISMATCH = "config_mismatch"
    BELOW_THRESHOLD = "below_threshold"
    BAD_SIGNATURES = "bad_signatures"
    KEY_SUBSTITUTION = "key_substitution"
    """Pinned keys: relayed keys are not signed by their owner's pinned key."""
    EQUIVOCATION = "equivocation"
    """Pinned keys: the survivor list is not vouched for as the one every client was shown."""

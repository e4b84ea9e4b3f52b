r"""``blind_robust``: ``masked_robust``'s rule for a sum only the clients may read (``blind_sum``).

A server-blind shared sum (FedStruct's summed Hop2Vec gradient ∇S) cannot feed a rule the server
runs on the sum, and ``masked_robust`` checks the kept clients' unmasked sum at the server. Here the
rule is judged as there, and the check moves to the clients:

1. Each client uploads its CKKS-encrypted count sketch; the key holder judges the pseudonymous
   Gram matrix and returns a 0/1 coefficient per pseudonym (multi-Krum or the norm filter,
   :func:`~securefg.protocol.robust.masked_robust.MaskedRobust.judge_call`, unchanged).
2. The kept clients' inputs are summed by ``blind_sum`` (SecAgg+ with each input blinded under the
   clients' group key): the server removes the masks and is left with the sum blinded, uniform to it.
3. The server asks the key holder for the sketch sum of the clients in that sum (the same
   request ``masked_robust`` sends); the key holder checks it against the inner products it judged
   and **seals** ``sketch || counts`` to every client with its own sealing key (sender-authenticated
   boxes, :meth:`~securefg.protocol.relay.sealed_box.SealingKey.seal_from`), bound to the session,
   round, tag and receiver. The server forwards the boxes, which it cannot open.
4. Every client gets the blinded sum, the kept list and its box; it unblinds the sum over the kept
   survivors, opens the box (only under the key holder's sealing key) and checks that the sum's
   sketch is the released sketch sum (:func:`~securefg.protocol.robust.masked_robust.check_masked_sum`):
   a kept client that masked another vector than it sketched, or a server that altered the
   blinded sum or the survivor list, makes every client refuse the round
   (:class:`~securefg.errors.ImplausibleSumError`). An unweighted sum is scaled by ``n / kept``,
   as ``masked_robust`` scales it.

**Who learns what** (semi-honest server and key holder, not colluding): the *server* learns who
the rule dropped and what ``blind_sum`` shows it (masked inputs, the survivor set), not the sum
nor its sketch. The *key holder* learns the pseudonymous sketches' Gram matrix and counts (as under
``masked_robust``) and the sketch of the kept clients' sum, which it decrypts to check and seal.
*Clients* learn the robust sum (as they learn the plain one under ``blind_sum``) and the kept list.
Not protected: the server colluding with the key holder (they decrypt every sketch) or with one
client (who holds the group key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import torch

from securefg.errors import CodecError, InvalidInputError, ProtocolError
from securefg.federation.channel import length_prefixed
from securefg.federation.codec import TensorSpec, decode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import is_client
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, SumOutcome, register_mechanism
from securefg.protocol.relay import sealing_directory
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.robust import ckks_robust as cr
from securefg.protocol.robust.masked_robust import (
    MaskedRobust,
    check_masked_sum,
    release_sketch_sum,
    sketch_sum_request,
)
from securefg.protocol.secure_sum.blind import BlindSum
from securefg.protocol.secure_sum.blinded_result import BlindedResult, unblind
from securefg.protocol.secure_sum.group_key import blinding_seed, ensure_group_key, held_key
from securefg.protocol.shared_result import STAGE as RESULT_STAGE

NAME = "blind_robust"
#: Domain label of the key holder's sealed release (one box per receiving client).
RELEASE_DOMAIN = b"securefg/robust/v1/blind-release"


class Stage:
    """Stages of one call besides the judge's (``masked_robust``'s) and the inner blind sum's."""

    SKETCH_RELEASE = "blind_robust/release"
    """The key holder's sealed boxes, up to the server (one blob per receiving client)."""
    FORWARD = "blind_robust/release/forward"
    """One client's box, from the server."""


def release_context(session: bytes, tag: str, round: int, holder: str, receiver: str) -> bytes:
    """What a sealed release is bound to: a box replayed into another call does not open."""
    return length_prefixed(RELEASE_DOMAIN, session, tag.encode(), str(round).encode(), holder.encode(),
                           receiver.encode())


def seal_release(call: ExchangeCall, holder: str, receivers: Sequence[str], released: bytes) -> bytes:
    """Acting as the key holder: ``released`` sealed to each receiving client, packed in
    ``receivers``' order.

    Raises:
        ProtocolError: A receiver that is not a client, or whose sealing key the holder lacks.
    """
    key, session = sealing_directory.own_key(call, holder), call.transport.session
    boxes = []
    for r in receivers:
        if not is_client(r):
            raise ProtocolError(f"{holder!r} was asked to seal a blind robust release to {r!r}; only clients read it")
        boxes.append(key.seal_from(sealing_directory.peer_public(call, holder, r), released,
                                   context=release_context(session, call.tag, call.round, holder, r)))
    return pack_blobs(boxes)


def open_release(call: ExchangeCall, receiver: str, holder: str, box: bytes) -> bytes:
    """Acting as a client: open the box the key holder sealed to it.

    Raises:
        AuthenticationError: Not sealed by the holder to this client for this call.
        ProtocolError: The client holds no sealing key of the holder.
    """
    return sealing_directory.own_key(call, receiver).open(
        box, sender_public=sealing_directory.peer_public(call, receiver, holder),
        context=release_context(call.transport.session, call.tag, call.round, holder, receiver))


def pack_result(blinded: bytes, kept: Sequence[str], members: Sequence[str]) -> bytes:
    """The server's result envelope: the blinded kept sum, the kept list and every member (a
    client reads the sum over the kept, scaled to the members)."""
    return pack_blobs([blinded, ",".join(kept).encode(), ",".join(members).encode()])


def unpack_result(payload: bytes) -> tuple[bytes, list[str], list[str]]:
    """``(blinded sum, kept, members)`` of :func:`pack_result`.

    Raises:
        CodecError: Not three parts, or names that are not UTF-8.
    """
    parts = unpack_blobs(payload, max_count=3)
    if len(parts) != 3:
        raise CodecError(f"a blind robust result holds {len(parts)} part(s), expected 3")
    try:
        kept, members = ([p for p in b.decode("utf-8").split(",") if p] for b in parts[1:])
    except UnicodeDecodeError:
        raise CodecError("a blind robust result's names are not UTF-8") from None
    return parts[0], kept, members


def unblind_kept(call: ExchangeCall, mech: BlindRobust, *, receiver: str, payload: bytes) -> tuple[torch.Tensor, BlindedResult, list[str], list[str]]:
    """Acting as a client: the kept clients' sum scaled to the members, unchecked (an auditor's
    reading of what the client holds; :func:`read_checked` also checks it).

    Raises:
        ProtocolError: The client holds no group key, or the kept list is empty or repeats a client.
    """
    blinded_bytes, kept, members = unpack_result(payload)
    if not kept or len(set(kept)) != len(kept):
        raise ProtocolError(f"{receiver}: the kept list of {call.tag!r} is empty or repeats a client")
    key = held_key(call, receiver)
    if key is None:
        raise ProtocolError(f"{receiver} holds no blind_sum group key for {call.tag!r}")
    blinded = BlindedResult.decode(blinded_bytes)
    total = unblind(blinded, key=key, settings=mech.inner.settings, session=call.transport.session, round=call.round,
                    tag=call.tag, clients=tuple(kept))
    return total.to(torch.float64) * (len(members) / len(blinded.survivors)), blinded, kept, members


def read_checked(call: ExchangeCall, mech: BlindRobust, *, receiver: str, holder: str, payload: bytes, box: bytes,
                 length: int) -> SumOutcome:
    """Acting as a client: unblind the kept clients' sum (``payload``: :func:`pack_result`), open
    the key holder's release and check the sum against it; the sum scaled by ``members / kept``
    (an unweighted sum, as ``masked_robust``).

    Raises:
        ImplausibleSumError: The sum's sketch is not the released sketch sum (a kept client masked
            another vector than it sketched, or the server altered the blinded sum).
        InvalidClaimError: The blinded result names unknown or repeated survivors.
        ProtocolError: A kept list that is empty or repeats a client.
    """
    scaled, blinded, kept, members = unblind_kept(call, mech, receiver=receiver, payload=payload)
    width = cr.sketch_width(length, mech.preset.slots)
    released = decode_tensor(open_release(call, receiver, holder, box), spec=TensorSpec({"x": (torch.float64, (width,))}))
    factor = len(members) / len(blinded.survivors)
    check_masked_sum(scaled, released, tail=0, width=width, terms=float(len(blinded.survivors)) * factor,
                     quantization_error=mech.quantization_error(len(kept)) * factor)
    return SumOutcome(scaled, tuple(sorted(blinded.survivors)))


@register_mechanism
class BlindRobust(MaskedRobust):
    """``masked_robust``'s judge over a ``blind_sum``: the clients read the robust sum, the server does not.

    Args: as :class:`~securefg.protocol.robust.masked_robust.MaskedRobust` (``inner_params`` are
    the ``blind_sum``'s).

    Raises:
        ImplausibleSumError: At the clients, the unblinded sum is not what the kept clients sketched.
        InvalidInputError: Fewer than two clients, or a count tail (a shared sum has none).
    """

    name = NAME
    exchanges = frozenset({ExchangeKind.SHARED_SUM})
    #: The coefficients are the rule's bookkeeping (who is in the sum, as a survivor list is): the
    #: server reads no value of the tag.
    coefficient_form: ClassVar[Form] = Form.KEYS
    inner_class = BlindSum
    protects = ("each input and the sum: the server sees CKKS-encrypted sketches, masked vectors of the kept clients "
                "and their sum blinded under the clients' group key, and learns who was dropped; the key holder sees "
                "the pseudonymous sketches' inner products and the kept sum's sketch; every client learns the sum")

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        raise InvalidInputError(f"{call.tag!r}: blind_robust carries shared sums only (the server may not read the sum)")

    def run_shared_sum(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> dict[str, SumOutcome]:
        """The four steps above, each party's part acting as that party."""
        self.preset.require_levels(2, what="blind_robust (ciphertext product, then a sum)")
        if call.count_tail:
            raise InvalidInputError(f"{call.tag!r}: a blind robust sum has no count tail")
        senders = sorted(p for p in inputs if p not in call.transport.offline)
        if len(senders) < 2:
            raise InvalidInputError(f"{call.tag!r}: a blind sum needs at least two clients")
        if not self.judges(len(senders)):
            return self.inner.run_shared_sum(call, {p: inputs[p] for p in senders})
        inputs = {p: self.as_masked(inputs[p]) for p in senders}
        length = int(next(iter(inputs.values())).numel())
        judged = self.judge_call(call, senders, inputs, length=length, tail=0, weighted=False)
        kept = judged.kept
        ensure_group_key(call, senders)  # every client reads the result, the dropped ones too
        session = call.transport.session
        blinds = {p: blinding_seed(k, session=session, round=call.round, tag=call.tag, client=p)
                  for p in kept if (k := held_key(call, p)) is not None}
        agg = self.inner._run(call, call.server, {p: inputs[p] for p in kept}, blinds=blinds)
        assert agg.ring_total is not None
        result = BlindedResult(len(kept), self.inner.settings.ring_bits(len(kept)), agg.contributors,
                               agg.ring_total).encode()

        # --- the key holder: check the sketch-sum request, seal the release to every client
        holder = judged.holder
        coeffs = judged.side.in_sum(agg.contributors)
        call.transport.send(Envelope(call.server, (holder,), call.round, call.tag,
                                     sketch_sum_request(judged.uploads, coeffs, weighted=False),
                                     stage=cr.Stage.SUM_REQUEST, form=Form.CIPHERTEXT))
        (req,) = call.transport.receive_from(holder, [call.server], tag=call.tag, round=call.round,
                                             stage=cr.Stage.SUM_REQUEST).values()
        released = release_sketch_sum(judged.secret, req.payload, judged.expect,
                                      width=cr.sketch_width(length, self.preset.slots), tail=0)
        sealing_directory.ensure(call, holders=[holder], owners=senders)  # it seals to their keys
        sealing_directory.ensure(call, holders=senders, owners=[holder])  # they check its key
        call.transport.send(req.reply(seal_release(call, holder, senders, released), sender=holder,
                                      stage=Stage.SKETCH_RELEASE, form=Form.SEALED))
        (up,) = call.transport.receive_from(call.server, [holder], tag=call.tag, round=call.round,
                                            stage=Stage.SKETCH_RELEASE).values()
        boxes = unpack_blobs(up.payload, max_count=len(senders))
        if len(boxes) != len(senders):
            raise ProtocolError(f"{call.tag!r}: the key holder sealed {len(boxes)} release(s) for {len(senders)} clients")

        # --- the server: the blinded sum and the kept list to every client, each its box
        header = pack_result(result, kept, senders)
        for r, box in zip(senders, boxes, strict=True):
            call.transport.send(Envelope(call.server, (r,), call.round, call.tag, box, stage=Stage.FORWARD,
                                         form=Form.SEALED))
        call.transport.send(Envelope(call.server, tuple(senders), call.round, call.tag, header, stage=RESULT_STAGE,
                                     form=Form.MASKED))
        cr.record_release(call.state_of(call.server, NAME), call.tag, call.round,
                          {p: (1.0 if p in agg.contributors else 0.0) for p in judged.side.order})
        out = {}
        for pid in senders:  # acting as each client
            if pid in call.transport.offline:
                continue
            (fwd,) = call.transport.receive(pid, tag=call.tag, round=call.round, stage=Stage.FORWARD)
            (env,) = call.transport.receive(pid, tag=call.tag, round=call.round, stage=RESULT_STAGE)
            out[pid] = read_checked(call, self, receiver=pid, holder=holder, payload=env.payload, box=fwd.payload,
                                    length=length)
        return out


__all__ = ["NAME", "BlindRobust", "Stage", "open_release", "pack_result", "read_checked", "release_context",
           "seal_release", "unblind_kept", "unpack_result"]

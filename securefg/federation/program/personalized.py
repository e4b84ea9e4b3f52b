"""``personalized_aggregate`` (``ckks``, ``plaintext``) and ``similarity`` (``plaintext``; ``ckks``
delegated to :mod:`~securefg.federation.program.ckks_flows`) as party-program halves.

Each runs the lockstep mechanism's flow with each role in its own process and emits the same
envelopes (sender, receivers, tag, stage, form, payload):

* **personalized_aggregate** under ``ckks`` (:mod:`securefg.protocol.ckks.personalized`): keys
  (every receiver gets the secret context, sealed to it); ``personalized/upload`` step at stage
  ``ckks/upload`` (each client encrypts the vector it offered); the server mixes one ciphertext
  per receiver ``sum_j A_ij Enc(x_j)`` and sends it; ``personalized/result`` step at stage
  ``ckks/personalized_result`` (each receiver decrypts its own mix).
* **personalized_aggregate** under ``plaintext`` (``Plaintext.run_personalized_aggregate``): the
  uploads in the clear at ``plaintext/upload``, each mix in the clear at ``plaintext/result``.
* **similarity** under ``plaintext`` (``Plaintext.run_similarity``): the offered vectors (through
  the tag's client transforms, e.g. local DP noise) in the clear at ``plaintext/upload``; the
  server computes every pair's similarity.

A client offers its input while it handles one of the method's actions (its layout, public
model metadata, rides back in that step's reply as for ``aggregate``); the server then runs the
exchange; a receiver reads its mix in a later action (:meth:`NodePersonalized.result`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from securefg.errors import ConfigError, InvalidInputError, UnexpectedMessageError
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.federation.flatten import Layout, flatten, layout_to_text, unflatten
from securefg.federation.party import SERVER
from securefg.federation.program import ckks_flows
from securefg.federation.program.calls import party_call
from securefg.federation.program.ckks_keys import ensure_keys
from securefg.federation.program.halves import client_half
from securefg.federation.program.server_runtime import LAYOUT
from securefg.federation.program.step import Step
from securefg.protocol.ckks.ckks_mechanism import CKKS
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.personalized import _check_coefficients
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.plaintext import Plaintext, pairwise_similarity
from securefg.protocol.stack import Resolved
from securefg.protocol.transform_rules import refuse_all

if TYPE_CHECKING:
    from securefg.federation.program.exchange import ClientExchange, ServerExchange

ACTION_PERSONALIZED_UPLOAD = "personalized/upload"
ACTION_PERSONALIZED_RESULT = "personalized/result"
ACTION_SIMILARITY_UPLOAD = "similarity/upload"
PLAINTEXT_UPLOAD = "plaintext/upload"
PLAINTEXT_RESULT = "plaintext/result"

PERSONALIZED = ExchangeKind.PERSONALIZED_AGGREGATE
SIMILARITY = ExchangeKind.SIMILARITY

Tensors = Mapping[str, torch.Tensor]


def _vector_spec(length: int) -> TensorSpec:
    return TensorSpec({"x": (torch.float64, (length,))})


def _resolve_personalized(stack: Any, tag: str) -> Resolved:
    """The binding of ``tag``; refuses transforms as ``Exchange.personalized_aggregate`` does."""
    res = stack.resolve(tag, PERSONALIZED)
    refuse_all(tag, res.transforms)
    if not isinstance(res.mechanism, (CKKS, Plaintext)):
        raise ConfigError(f"personalized_aggregate tag {tag!r}: mechanism {res.mechanism.name!r} has no "
                          "party-program halves (ckks, plaintext)")
    return res


# ====================================================================== server halves
def personalized_aggregate(ex: ServerExchange, tag: str, coefficients: Mapping[str, Mapping[str, float]], *,
                           clients: Iterable[str] | None = None) -> list[str]:
    """The server's half of ``Exchange.personalized_aggregate``: client i gets
    ``sum_j coefficients[i][j] x_j`` over the vectors ``clients`` offered for ``tag`` this round.

    Returns:
        The receivers that took their mix (read it with ``ClientContext.personalized``).

    Raises:
        InvalidInputError: A contributor missing or with another layout; (``ckks``) a coefficient
            naming a client that offered nothing, or not finite.
    """
    ex.use_tag(tag, PERSONALIZED)
    rt, round = ex.rt, ex.round
    res = _resolve_personalized(ex.stack, tag)
    members = [c for c in (rt.live if clients is None else clients) if c not in rt.dropped]
    layout, _ = ex.layout_of(tag, members)
    length = layout.size
    mech = res.mechanism
    if isinstance(mech, CKKS):
        return _personalized_ckks(ex, mech, res, tag, coefficients, members, length)
    rt.step(members, action=ACTION_PERSONALIZED_UPLOAD, round=round, tag=tag, stage=PLAINTEXT_UPLOAD)
    got = rt.transport.receive_from(SERVER, members, tag=tag, round=round, stage=PLAINTEXT_UPLOAD)
    uploads = {p: decode_tensor(got[p].payload, spec=_vector_spec(length)) for p in got}
    receivers = [i for i in coefficients if i not in rt.dropped]
    for i in receivers:
        mix = sum(float(a) * uploads[j] for j, a in coefficients[i].items() if j in uploads)
        if not isinstance(mix, torch.Tensor):
            raise InvalidInputError(f"{tag!r}: the mix of {i!r} combines no upload")
        rt.transport.send(Envelope(SERVER, (i,), round, tag, encode_tensor(mix), stage=PLAINTEXT_RESULT))
    return sorted(rt.step(receivers, action=ACTION_PERSONALIZED_RESULT, round=round, tag=tag, stage=PLAINTEXT_RESULT))


def _personalized_ckks(ex: ServerExchange, mech: CKKS, res: Resolved, tag: str,
                       coefficients: Mapping[str, Mapping[str, float]], members: Sequence[str], length: int) -> list[str]:
    """:func:`~securefg.protocol.ckks.personalized.personalized_sums` as the server."""
    rt, round = ex.rt, ex.round
    _check_coefficients(dict.fromkeys(members), coefficients)  # type: ignore[arg-type]
    mech.keys.preset.require_levels(1, what="personalized_aggregate (ciphertext times public scalar)")
    call = ckks_flows._server_call(rt, res, round=round, tag=tag, kind=PERSONALIZED)
    receivers = [i for i in coefficients if i not in rt.dropped]
    ensure_keys(rt, mech.keys, call, kind=PERSONALIZED, encryptors=members, decryptors=receivers, galois=False)
    senders = [j for j in members if j not in rt.dropped]
    rt.step(senders, action=ACTION_PERSONALIZED_UPLOAD, round=round, tag=tag, stage=Stage.UPLOAD)
    server_ctx = mech.keys.context_of(call, SERVER)
    got = rt.transport.receive_from(SERVER, senders, tag=tag, round=round, stage=Stage.UPLOAD)
    uploads = {pid: server_ctx.load(got[pid].payload, expected_length=length) for pid in sorted(got)}
    receivers = [i for i in receivers if i not in rt.dropped]
    rerandomize = bool(mech.params["rerandomize"])
    for i in receivers:
        terms = [(uploads[j], float(a)) for j, a in sorted(coefficients[i].items()) if j in uploads and float(a) != 0.0]
        if rerandomize or not terms:  # a fresh encryption of zeros hides the mix (or is the whole all-zero row)
            terms.append((server_ctx.encrypt_zeros(length), 1.0))
        mixed = EncryptedVector.linear_combination(terms)
        rt.transport.send(Envelope(SERVER, (i,), round, tag, mixed.to_bytes(), stage=Stage.PERSONALIZED_RESULT,
                                   form=Form.CIPHERTEXT))
    return sorted(rt.step(receivers, action=ACTION_PERSONALIZED_RESULT, round=round, tag=tag,
                          stage=Stage.PERSONALIZED_RESULT))


def similarity(ex: ServerExchange, tag: str, *, clients: Iterable[str] | None = None,
               metric: str = "cosine") -> tuple[list[str], torch.Tensor]:
    """The server's half of ``Exchange.similarity``: (sorted contributors, similarity matrix)."""
    ex.use_tag(tag, SIMILARITY)
    rt, round = ex.rt, ex.round
    members = [c for c in (rt.live if clients is None else clients) if c not in rt.dropped]
    res = ex.stack.resolve(tag, SIMILARITY)
    if isinstance(res.mechanism, CKKS):
        return ckks_flows.similarity(rt, ex.stack, tag, round=round, clients=members, metric=metric)
    if not isinstance(res.mechanism, Plaintext):
        raise ConfigError(f"similarity tag {tag!r}: mechanism {res.mechanism.name!r} has no party-program halves "
                          "(ckks, plaintext)")
    pairwise_similarity({}, metric)  # refuses an unknown metric before anyone uploads
    layout, _ = ex.layout_of(tag, members)
    rt.step(members, action=ACTION_SIMILARITY_UPLOAD, round=round, tag=tag, stage=PLAINTEXT_UPLOAD)
    got = rt.transport.receive_from(SERVER, members, tag=tag, round=round, stage=PLAINTEXT_UPLOAD)
    vecs = {p: decode_tensor(got[p].payload, spec=_vector_spec(layout.size)) for p in got}
    pairs = pairwise_similarity(vecs, metric)
    order = sorted(vecs)
    return order, torch.tensor([[pairs[(a, b)] for b in order] for a in order], dtype=torch.float64)


# ====================================================================== client halves
@client_half("personalized")
class NodePersonalized:
    """A client's half of ``personalized_aggregate`` (``ckks``, ``plaintext``).

    Args:
        ex (ClientExchange): The party's exchange half (registers its actions).
    """

    def __init__(self, ex: ClientExchange) -> None:
        self.ex = ex
        self.inputs: dict[tuple[str, int], tuple[torch.Tensor, Layout]] = {}
        self.results: dict[tuple[str, int], dict[str, torch.Tensor]] = {}
        ex.rt.on(ACTION_PERSONALIZED_UPLOAD, self._on_upload)
        ex.rt.on(ACTION_PERSONALIZED_RESULT, self._on_result)

    def offer(self, tag: str, round: int, tensors: Tensors) -> None:
        """This client's input to ``personalized_aggregate(tag)`` this round (its layout goes
        back in the current step's reply)."""
        _resolve_personalized(self.ex.stack, tag)
        pid = self.ex.rt.party.pid
        vec, layout = flatten(tensors, what=f"{tag!r} from {pid}")
        self.inputs[(tag, round)] = (vec, layout)
        self.ex.rt.reply_info[LAYOUT + tag] = layout_to_text(layout)

    def result(self, tag: str, round: int) -> dict[str, torch.Tensor]:
        """This client's own mix of ``personalized_aggregate(tag)`` in ``round``."""
        if (tag, round) not in self.results:
            raise UnexpectedMessageError(f"{self.ex.rt.party.pid} received no {tag!r} mix in round {round}")
        return self.results.pop((tag, round))

    def _on_upload(self, step: Step) -> None:
        pid, key = self.ex.rt.party.pid, (step.tag, step.round)
        if key not in self.inputs:
            raise InvalidInputError(f"{pid} has no input prepared for {step.tag!r} round {step.round}")
        vec, layout = self.inputs[key]
        self.inputs[key] = (torch.empty(0), layout)  # the input is gone; the layout decodes the mix
        mech = _resolve_personalized(self.ex.stack, step.tag).mechanism
        if isinstance(mech, CKKS):
            self.ex.ckks._encrypt_to_server(step.tag, step.round, PERSONALIZED, lambda preset: vec)
            return
        self.ex.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, encode_tensor(vec),
                                           stage=PLAINTEXT_UPLOAD))

    def _on_result(self, step: Step) -> None:
        pid, key = self.ex.rt.party.pid, (step.tag, step.round)
        if key not in self.inputs:
            raise UnexpectedMessageError(f"{pid} got a {step.tag!r} mix but offered nothing (no layout)")
        _, layout = self.inputs.pop(key)
        mech = _resolve_personalized(self.ex.stack, step.tag).mechanism
        stage = Stage.PERSONALIZED_RESULT if isinstance(mech, CKKS) else PLAINTEXT_RESULT
        got = self.ex.rt.transport.receive_from(pid, [SERVER], tag=step.tag, round=step.round, stage=stage)
        if SERVER not in got:
            raise UnexpectedMessageError(f"{pid} got a {step.tag!r} result step without its mix")
        payload = got[SERVER].payload
        if isinstance(mech, CKKS):
            nodes = self.ex.ckks.keys
            keys, call = nodes.call(step.tag, step.round, PERSONALIZED)
            nodes.install(keys, call)  # a receiver that sent nothing got its keys with this step
            secret = keys.secret_of(call, pid)
            vec = secret.decrypt(secret.load(payload, expected_length=layout.size))
        else:
            vec = decode_tensor(payload, spec=_vector_spec(layout.size))
        self.results[key] = unflatten(vec, layout)


@client_half("similarity")
class NodeSimilarity:
    """A client's half of ``similarity``: ``plaintext`` here, ``ckks`` through ``ex.ckks``.

    Args:
        ex (ClientExchange): The party's exchange half (registers its action).
    """

    def __init__(self, ex: ClientExchange) -> None:
        self.ex = ex
        self.inputs: dict[tuple[str, int], torch.Tensor] = {}
        ex.rt.on(ACTION_SIMILARITY_UPLOAD, self._on_upload)

    def offer(self, tag: str, round: int, vector: torch.Tensor) -> None:
        """This client's private vector for ``similarity(tag)`` this round; the tag's client
        transforms (e.g. local DP noise) run on it here, as ``Exchange.similarity`` runs them."""
        res = self.ex.stack.resolve(tag, SIMILARITY)
        if isinstance(res.mechanism, CKKS):
            self.ex.ckks.offer_similarity(tag, round, vector)
            return
        pid = self.ex.rt.party.pid
        v, layout = flatten({"h": vector}, what=f"{tag!r} from {pid}")
        call = party_call(self.ex.rt.transport, self.ex.parties, round=round, tag=tag, res=res, kind=SIMILARITY,
                          rng=self.ex.rng)
        for t in res.transforms:
            v = t.client(call, pid, v)
        self.inputs[(tag, round)] = v.detach().to("cpu", torch.float64)
        self.ex.rt.reply_info[LAYOUT + tag] = layout_to_text(layout)

    def _on_upload(self, step: Step) -> None:
        pid, key = self.ex.rt.party.pid, (step.tag, step.round)
        if key not in self.inputs:
            raise InvalidInputError(f"{pid} has no input prepared for similarity {step.tag!r} round {step.round}")
        self.ex.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, encode_tensor(self.inputs.pop(key)),
                                           stage=PLAINTEXT_UPLOAD))

"""CKKS exchanges over Flower: ``ckks`` (aggregate, similarity) and ``ckks_relay``, split by party.

Each exchange runs the in-process flow (:mod:`securefg.protocol.ckks.aggregate`,
:mod:`~securefg.protocol.ckks.similarity`, :mod:`securefg.protocol.relay.ckks_relay`) with each
role in its own process and the same helper functions for each role's computation:

* **aggregate** -- keys; ``aggregate`` step at stage ``ckks/upload`` (each client encrypts its
  prepared input); the server adds the ciphertexts and sends ``Enc(sum)`` to the key holder;
  ``ckks/decrypt`` step (the key holder floods and releases the sum).
* **similarity** -- keys (the server gets Galois keys); ``ckks/upload`` step; the server computes
  every pair's masked product in a CSPRNG order; ``ckks/similarity`` step (the key holder
  decrypts the permuted scalars, floods them); the server un-permutes.
* **relay** -- keys (every sender also decrypts); ``ckks_relay/upload`` step; the server parses,
  mixes (if the method planned it), rerandomizes and shuffles per recipient;
  ``ckks_relay/forward`` step (each recipient decrypts its bundle).

The key holder is the ``keyholder`` party's process when the run has one, else a client's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from securefg.errors import (
    ConfigError,
    InvalidInputError,
    MechanismError,
    ProtocolError,
    UnexpectedMessageError,
)
from securefg.federation.codec import TensorSpec, decode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import SERVER
from securefg.federation.program.calls import party_call, stand_ins
from securefg.federation.program.ckks_keys import NodeKeys, ensure_keys
from securefg.federation.program.client_runtime import ClientRuntime
from securefg.federation.program.server_runtime import ServerRuntime
from securefg.federation.program.step import Step
from securefg.protocol.ckks.aggregate import release_sum
from securefg.protocol.ckks.ckks_mechanism import CKKS
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.similarity import (
    check_metric,
    lift_squared,
    pair_products,
    prepare_input,
    release_products,
    unpermute,
)
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.relay.ckks_relay import CKKSRelay, decrypt_bundle, encrypt_item, parse_uploads
from securefg.protocol.relay.constants import RelayStage
from securefg.protocol.stack import ProtocolStack, Resolved

ACTION_SIMILARITY_UPLOAD = "ckks/similarity/upload"
ACTION_SIMILARITY = "ckks/similarity/decrypt"
ACTION_DECRYPT = "ckks/decrypt"
ACTION_RELAY_UPLOAD = "ckks_relay/upload"
ACTION_RELAY_FORWARD = "ckks_relay/forward"


def _server_call(rt: ServerRuntime, res: Resolved, *, round: int, tag: str, kind: ExchangeKind) -> ExchangeCall:
    return party_call(rt.transport, stand_ins(rt.party, rt.parties), round=round, tag=tag, res=res, kind=kind)


def _uploads(rt: ServerRuntime, call: ExchangeCall, senders: Sequence[str], stage: str) -> dict[str, bytes]:
    got = rt.transport.receive_from(SERVER, senders, tag=call.tag, round=call.round, stage=stage)
    if not got:
        raise MechanismError(f"no client uploaded anything for {call.tag!r}")
    return {pid: env.payload for pid, env in sorted(got.items())}


def _load_all(rt: ServerRuntime, mech: CKKS, call: ExchangeCall, payloads: dict[str, bytes]) -> dict[str, EncryptedVector]:
    ctx = mech.keys.context_of(call, SERVER)
    cts = {pid: ctx.load(p) for pid, p in payloads.items()}
    if len({c.length for c in cts.values()}) > 1:
        raise ProtocolError(f"inputs to {call.tag!r} have different lengths {sorted({c.length for c in cts.values()})}")
    return cts


def _ask_holder(rt: ServerRuntime, holder: str, call: ExchangeCall, *, action: str, stage: str,
                info: dict[str, str | int] | None = None) -> Envelope:
    """One step to the key holder; returns its one reply envelope at ``stage``."""
    rt.step([holder], action=action, round=call.round, tag=call.tag, info=info)
    got = rt.transport.receive_from(SERVER, [holder], tag=call.tag, round=call.round, stage=stage)
    if holder not in got:
        raise MechanismError(f"CKKS key holder {holder!r} did not answer {action!r}: {rt.dropped.get(holder, 'no reply')}")
    return got[holder]


# ====================================================================== server halves
def sum_server(rt: ServerRuntime, res: Resolved, *, tag: str, round: int, clients: Sequence[str],
               length: int, action: str, info: dict[str, str | int] | None = None) -> tuple[torch.Tensor, tuple[str, ...]]:
    """``encrypted_sum`` as the server: the released sum and who contributed."""
    mech = res.mechanism
    assert isinstance(mech, CKKS)
    call = _server_call(rt, res, round=round, tag=tag, kind=ExchangeKind.AGGREGATE)
    senders = [c for c in clients if c not in rt.dropped]
    holder = ensure_keys(rt, mech.keys, call, kind=ExchangeKind.AGGREGATE, encryptors=senders, decryptors=(), galois=False)
    rt.step(senders, action=action, round=round, tag=tag, stage=Stage.UPLOAD, info=info)
    cts = _load_all(rt, mech, call, _uploads(rt, call, senders, Stage.UPLOAD))
    if next(iter(cts.values())).length != length:
        raise ProtocolError(f"{tag!r} uploads hold {next(iter(cts.values())).length} values, expected {length}")
    total = None
    for ct in cts.values():
        total = ct if total is None else total + ct
    assert total is not None
    rt.transport.send(Envelope(SERVER, (holder,), round, tag, total.to_bytes(), stage=Stage.DECRYPT_REQUEST,
                               form=Form.CIPHERTEXT))
    env = _ask_holder(rt, holder, call, action=ACTION_DECRYPT, stage=Stage.DECRYPT_RESULT)
    total_plain = decode_tensor(env.payload, spec=TensorSpec({"x": (torch.float64, (length,))}))
    return total_plain, tuple(cts)


def similarity(rt: ServerRuntime, stack: ProtocolStack, tag: str, *, round: int, clients: Sequence[str],
               metric: str = "cosine") -> tuple[list[str], torch.Tensor]:
    """The server's half of ``Exchange.similarity`` under ``ckks``: (order, similarity matrix)."""
    res = stack.resolve(tag, ExchangeKind.SIMILARITY)
    mech = res.mechanism
    if not isinstance(mech, CKKS):
        raise ConfigError(f"similarity tag {tag!r}: only 'ckks' runs on the Flower backend, not {mech.name!r}")
    check_metric(metric)
    mech.keys.preset.require_levels(2, what="encrypted similarity (ciphertext product, then a mask)")
    call = _server_call(rt, res, round=round, tag=tag, kind=ExchangeKind.SIMILARITY)
    senders = sorted(c for c in clients if c not in rt.dropped)
    holder = ensure_keys(rt, mech.keys, call, kind=ExchangeKind.SIMILARITY, encryptors=senders, decryptors=(), galois=True)
    rt.step(senders, action=ACTION_SIMILARITY_UPLOAD, round=round, tag=tag, stage=Stage.UPLOAD, info={"metric": metric})
    uploads = _load_all(rt, mech, call, _uploads(rt, call, senders, Stage.UPLOAD))
    order = sorted(uploads)
    pairs, perm, request = pair_products(uploads, order)
    rt.transport.send(Envelope(SERVER, (holder,), round, tag, request, stage=Stage.SIMILARITY_REQUEST,
                               form=Form.CIPHERTEXT))
    env = _ask_holder(rt, holder, call, action=ACTION_SIMILARITY, stage=Stage.SIMILARITY_RESULT,
                      info={"metric": metric, "count": len(pairs)})
    values = unpermute(pairs, perm, env.payload)
    mat = torch.tensor([[values[(a, b)] for b in order] for a in order], dtype=torch.float64)
    return order, mat


def relay(rt: ServerRuntime, stack: ProtocolStack, tag: str, *, round: int, clients: Sequence[str],
          exclude_self: bool = True, shuffle: bool = True) -> list[str]:
    """The server's half of ``Exchange.relay`` under ``ckks_relay`` (with the mix plan the method
    set on the server, if any); returns the recipients that got a bundle."""
    res = stack.resolve(tag, ExchangeKind.RELAY)
    mech = res.mechanism
    if not isinstance(mech, CKKSRelay):
        raise ConfigError(f"relay tag {tag!r}: only 'ckks_relay' runs on the Flower backend, not {mech.name!r}")
    call = _server_call(rt, res, round=round, tag=tag, kind=ExchangeKind.RELAY)
    plan = call.state_of(SERVER, mech.name).get("mix", {}).pop(tag, None)
    if plan is not None:
        mech.keys.preset.require_levels(1, what="ckks_relay with a mix plan")
    senders = sorted(c for c in clients if c not in rt.dropped)
    ensure_keys(rt, mech.keys, call, kind=ExchangeKind.RELAY, encryptors=senders, decryptors=senders, galois=False)
    rt.step(senders, action=ACTION_RELAY_UPLOAD, round=round, tag=tag, stage=RelayStage.UPLOAD)
    server_ctx = mech.keys.context_of(call, SERVER)
    header, cts = parse_uploads(server_ctx, _uploads(rt, call, senders, RelayStage.UPLOAD), tag=tag)
    outputs = cts if plan is None else mech.mix(plan, cts)
    recipients = sorted(cts)
    for r in recipients:
        rt.transport.send(Envelope(SERVER, (r,), round, tag,
                                   mech.bundle_for(server_ctx, header, outputs, r, exclude_self=exclude_self, shuffle=shuffle),
                                   stage=RelayStage.FORWARD, form=Form.CIPHERTEXT))
    got = rt.step(recipients, action=ACTION_RELAY_FORWARD, round=round, tag=tag, stage=RelayStage.FORWARD,
                  info={"items": len(outputs)})
    return sorted(got)


# ====================================================================== client and key-holder halves
class NodeCKKS:
    """A client's (and the key holder's) half of the CKKS exchanges.

    Args:
        rt (ClientRuntime): This party's runtime (registers its CKKS actions).
        stack (ProtocolStack): The run's stack.
        pids (Sequence[str]): Every non-server party of the run (public).
    """

    def __init__(self, rt: ClientRuntime, stack: ProtocolStack, pids: Sequence[str]) -> None:
        self.rt, self.stack = rt, stack
        self.keys = NodeKeys(rt, stack, pids)
        self.similarity_inputs: dict[tuple[str, int], torch.Tensor] = {}
        self.relay_items: dict[tuple[str, int], bytes] = {}
        self.relay_layouts: dict[tuple[str, int], bytes] = {}
        self.bundles: dict[tuple[str, int], list[bytes]] = {}
        rt.on(ACTION_SIMILARITY_UPLOAD, self._on_similarity_upload)
        rt.on(ACTION_SIMILARITY, self._on_similarity_request)
        rt.on(ACTION_DECRYPT, self._on_decrypt)
        rt.on(ACTION_RELAY_UPLOAD, self._on_relay_upload)
        rt.on(ACTION_RELAY_FORWARD, self._on_relay_forward)

    # ----------------------------------------------------------- what the method hands over
    def offer_similarity(self, tag: str, round: int, vector: torch.Tensor) -> None:
        """This client's private vector for ``similarity(tag)`` (transforms run on it here)."""
        res = self.stack.resolve(tag, ExchangeKind.SIMILARITY)
        _, call = self.keys.call(tag, round, ExchangeKind.SIMILARITY)
        v = vector.detach().to("cpu", torch.float64).reshape(-1)
        for t in res.transforms:
            v = t.client(call, self.rt.party.pid, v)
        self.similarity_inputs[(tag, round)] = v

    def offer_relay(self, tag: str, round: int, item: bytes) -> None:
        """This client's item for ``relay(tag)`` (encoded tensors)."""
        self.relay_items[(tag, round)] = item

    def relayed(self, tag: str, round: int) -> list[bytes]:
        """The items this client received from ``relay(tag)`` (decrypted)."""
        if (tag, round) not in self.bundles:
            raise UnexpectedMessageError(f"{self.rt.party.pid} received no {tag!r} bundle in round {round}")
        return self.bundles.pop((tag, round))

    def upload_sum_input(self, tag: str, round: int, vector: torch.Tensor) -> None:
        """``ckks`` aggregate: encrypt this client's prepared input and send it to the server."""
        self._encrypt_to_server(tag, round, ExchangeKind.AGGREGATE, lambda preset: vector)

    def _encrypt_to_server(self, tag: str, round: int, kind: ExchangeKind,
                           prepare: Callable[[Any], torch.Tensor], *, window: bool = False) -> None:
        """Install this call's keys, encrypt ``prepare(preset)`` (``window``: for inner products)
        and upload it to the server."""
        pid = self.rt.party.pid
        keys, call = self.keys.call(tag, round, kind)
        self.keys.install(keys, call)
        ct = keys.context_of(call, pid).encrypt(prepare(keys.preset), window=window)
        self.rt.transport.send(Envelope(pid, (SERVER,), round, tag, ct.to_bytes(), stage=Stage.UPLOAD,
                                        form=Form.CIPHERTEXT))

    # ------------------------------------------------------------------ client actions
    def _on_similarity_upload(self, step: Step) -> None:
        pid, key = self.rt.party.pid, (step.tag, step.round)
        if key not in self.similarity_inputs:
            raise InvalidInputError(f"{pid} has no input prepared for similarity {step.tag!r} round {step.round}")
        raw, metric = self.similarity_inputs.pop(key), str(step.info.get("metric", "cosine"))
        self._encrypt_to_server(step.tag, step.round, ExchangeKind.SIMILARITY,
                                lambda preset: prepare_input(raw, metric, preset, pid), window=True)

    def _on_relay_upload(self, step: Step) -> None:
        pid, key = self.rt.party.pid, (step.tag, step.round)
        if key not in self.relay_items:
            raise InvalidInputError(f"{pid} has no item prepared for relay {step.tag!r} round {step.round}")
        keys, call = self.keys.call(step.tag, step.round, ExchangeKind.RELAY)
        self.keys.install(keys, call)
        self.relay_layouts[key], payload = encrypt_item(keys.context_of(call, pid), self.relay_items.pop(key),
                                                        what=f"{step.tag!r} item of {pid}")
        self.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, payload, stage=RelayStage.UPLOAD,
                                        form=Form.CIPHERTEXT))

    def _on_relay_forward(self, step: Step) -> None:
        pid, key = self.rt.party.pid, (step.tag, step.round)
        keys, call = self.keys.call(step.tag, step.round, ExchangeKind.RELAY)
        got = self.rt.transport.receive_from(pid, [SERVER], tag=step.tag, round=step.round, stage=RelayStage.FORWARD)
        if SERVER not in got or key not in self.relay_layouts:
            raise UnexpectedMessageError(f"{pid} got a {step.tag!r} forward step without its bundle or its upload")
        self.bundles[key] = decrypt_bundle(keys.secret_of(call, pid), got[SERVER].payload,
                                           own_layout=self.relay_layouts.pop(key), max_items=int(step.info["items"]), pid=pid)

    # -------------------------------------------------------------- key-holder actions
    def _request(self, step: Step, stage: str, kind: ExchangeKind) -> tuple[CKKS, ExchangeCall, Envelope]:
        pid = self.rt.party.pid
        res = self.stack.resolve(step.tag, kind)
        mech = res.mechanism
        assert isinstance(mech, CKKS)
        _, call = self.keys.call(step.tag, step.round, kind)
        if mech.keys.holder(call) != pid:
            raise ProtocolError(f"{pid} was asked to decrypt {step.tag!r} but is not its key holder")
        got = self.rt.transport.receive_from(pid, [SERVER], tag=step.tag, round=step.round, stage=stage)
        if SERVER not in got:
            raise UnexpectedMessageError(f"{pid} got no {stage!r} request for {step.tag!r}")
        return mech, call, got[SERVER]

    def _on_decrypt(self, step: Step) -> None:
        mech, call, req = self._request(step, Stage.DECRYPT_REQUEST, ExchangeKind.AGGREGATE)
        released = release_sum(mech.keys.secret_of(call, self.rt.party.pid), req.payload, mech.noise)
        self.rt.transport.send(req.reply(released, sender=self.rt.party.pid, stage=Stage.DECRYPT_RESULT, form=Form.AGGREGATE))

    def _on_similarity_request(self, step: Step) -> None:
        mech, call, req = self._request(step, Stage.SIMILARITY_REQUEST, ExchangeKind.SIMILARITY)
        metric, count = str(step.info.get("metric", "cosine")), int(step.info.get("count", 0))
        released = release_products(mech.keys.secret_of(call, self.rt.party.pid), req.payload, count=count,
                                    lift2=lift_squared(metric, mech.keys.preset), noise=mech.noise)
        self.rt.transport.send(req.reply(released, sender=self.rt.party.pid, stage=Stage.SIMILARITY_RESULT,
                                         form=Form.AGGREGATE))

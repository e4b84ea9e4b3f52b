"""The ``ckks_relay`` mechanism: tensors relayed as CKKS ciphertexts the server can compute on.

For CeFGC(+) (cefgc.md §3 R1/R2): each client uploads ``Enc(theta_k)`` under the clients' CKKS
key; the server optionally computes public linear combinations (CeFGC+'s pair averages,
``(theta_j + theta_j*) / 2``, set with :meth:`CKKSRelay.plan_mix`), **rerandomizes every copy it
forwards** (adds a fresh ``Enc(0)`` per recipient), shuffles each bundle with a CSPRNG
permutation, and forwards; recipients decrypt.

Items must be float tensors encoded with :func:`securefg.federation.codec.encode_tensors`, all with
the same names/shapes/dtypes (public architecture metadata, sent in the clear next to the
ciphertext); what comes out is re-encoded the same way, equal up to CKKS error (~1e-8 absolute).
For opaque bytes use ``sealed_relay``.

Protects against:

* **The server reading items**: it holds a public context only (``Form.CIPHERTEXT`` in the transcript).
* **Linking by bytes**: a forwarded copy shares no bytes with the upload or with other recipients'
  copies, so an observer of both sides (or colluding recipients comparing copies) cannot match
  them without the secret key; bundles are shuffled, so recipients cannot tell senders by position.

Does not protect against:

* The **server** linking (it does the forwarding) or a **secret-key holder who also sees the
  uploads** (it can decrypt both sides and compare). Every client holds the secret key, so one
  client colluding with the server decrypts every upload.
* Tampering: CKKS ciphertexts are malleable, so a malicious server can send any ciphertext under
  the public key (semi-honest model). For integrity against the server use ``sealed_relay``.
* With a mix plan, what the combination reveals to its recipient: a client that receives
  ``(theta_j + theta_i) / 2`` while knowing ``theta_i`` recovers ``theta_j = 2 * mix - theta_i``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.errors import CodecError, InvalidInputError, ProtocolError
from securefg.federation.codec import decode_tensors, encode_tensors
from securefg.federation.envelope import Envelope, Form
from securefg.federation.flatten import Layout, flatten, unflatten
from securefg.federation.party import Party
from securefg.protocol.ckks.ckks_mechanism import CKKS_KEY_DEFAULTS, ckks_key_problems
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.ckks.presets import resolve_preset
from securefg.protocol.ckks.public_context import PublicContext
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, register_mechanism
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.constants import RelayStage
from securefg.protocol.relay.shuffle import secure_shuffle

_FLOAT_DTYPES = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64}
_DTYPE_NAMES = {v: k for k, v in _FLOAT_DTYPES.items()}


def encode_layout(layout: Layout) -> bytes:
    """Public tensor metadata as JSON (names, dtypes, shapes)."""
    return json.dumps([[n, _DTYPE_NAMES[d], list(s)] for n, s, d in layout.fields]).encode()


def decode_layout(data: bytes) -> Layout:
    """Parse :func:`encode_layout` output, checking every field (JSON cannot run code)."""
    if len(data) > 1 << 20:
        raise CodecError("tensor layout header exceeds 1 MiB")
    try:
        raw = json.loads(data.decode("utf-8"))
        if not isinstance(raw, list):
            raise TypeError(f"expected a list of fields, got {type(raw).__name__}")
        fields = tuple(
            (str(n), tuple(int(x) for x in s), _FLOAT_DTYPES[d])
            for n, d, s in raw
            if isinstance(n, str) and isinstance(s, list) and all(isinstance(x, int) and x >= 0 for x in s)
        )
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError) as exc:
        raise CodecError(f"malformed tensor layout header: {type(exc).__name__}: {exc}") from exc
    if len(fields) != len(raw) or not fields:
        raise CodecError("tensor layout header has invalid or no fields")
    return Layout(fields)


@register_mechanism
class CKKSRelay(Mechanism):
    """Relay of float tensors as rerandomized CKKS ciphertexts (server can add and scale them).

    Args:
        preset (str): CKKS preset, as for ``ckks``; shares its key session. (default: ``"default"``)
        key_holder (str, optional): As for ``ckks``.
        rerandomize (bool): Rerandomize every forwarded copy. (default: :obj:`True`)
    """

    name = "ckks_relay"
    exchanges = frozenset({ExchangeKind.RELAY})
    defaults: ClassVar[Mapping[str, Any]] = {**CKKS_KEY_DEFAULTS, "rerandomize": True}
    protects = "ciphertext: the server forwards and rerandomizes CKKS ciphertexts it cannot decrypt"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.keys = CKKSKeySetup(resolve_preset(self.params), key_holder=self.params["key_holder"])

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        """Unknown keys and the CKKS key parameters' problems."""
        problems = super().validate_params(params) + ckks_key_problems({**cls.defaults, **params})
        if not isinstance({**cls.defaults, **params}["rerandomize"], bool):
            problems.append("rerandomize must be true or false")
        return problems

    @staticmethod
    def plan_mix(server: Party, tag: str, plan: Mapping[str, Mapping[str, float]]) -> None:
        """Acting as the server: forward linear combinations of items in the next relay of ``tag``.

        Output ``o`` is ``sum_s plan[o][s] * item_s`` (public coefficients, one CKKS level) and
        counts as ``o``'s own item for ``exclude_self``. The plan is used once.
        """
        for o, row in plan.items():
            if not row or not all(math.isfinite(float(a)) for a in row.values()):
                raise InvalidInputError(f"mix plan row {o!r} must be a non-empty map of finite coefficients")
        server.state.setdefault("mech/ckks_relay", {}).setdefault("mix", {})[tag] = {
            o: {s: float(a) for s, a in row.items()} for o, row in plan.items()
        }

    def run_relay(
        self, call: ExchangeCall, items: Mapping[str, bytes], *, exclude_self: bool, shuffle: bool
    ) -> dict[str, list[bytes]]:
        """Upload Enc(item), (mix), rerandomize per copy, shuffle, forward, decrypt."""
        senders = sorted(p for p in items if p not in call.transport.offline)
        plan = call.state_of(call.server, self.name).get("mix", {}).pop(call.tag, None)
        if plan is not None:
            self.keys.preset.require_levels(1, what="ckks_relay with a mix plan")
        self.keys.ensure(call, encryptors=senders, decryptors=senders, galois=False)

        # --- each client: decode its tensors, encrypt, upload with the public layout
        layouts: dict[str, bytes] = {}
        for s in senders:
            layouts[s], payload = encrypt_item(self.keys.context_of(call, s), items[s], what=f"{call.tag!r} item of {s}")
            call.transport.send(
                Envelope(s, (call.server,), call.round, call.tag, payload, stage=RelayStage.UPLOAD, form=Form.CIPHERTEXT)
            )

        # --- server: parse, (mix), rerandomize each copy, shuffle, forward
        server_ctx = self.keys.context_of(call, call.server)
        got = call.transport.receive_from(call.server, senders, tag=call.tag, round=call.round, stage=RelayStage.UPLOAD)
        header, cts = parse_uploads(server_ctx, {s: got[s].payload for s in senders}, tag=call.tag)
        outputs = cts if plan is None else self.mix(plan, cts)
        for r in senders:
            call.transport.send(
                Envelope(call.server, (r,), call.round, call.tag,
                         self.bundle_for(server_ctx, header, outputs, r, exclude_self=exclude_self, shuffle=shuffle),
                         stage=RelayStage.FORWARD, form=Form.CIPHERTEXT)
            )

        # --- each recipient: decrypt and re-encode
        out: dict[str, list[bytes]] = {}
        for r in senders:
            (env,) = call.transport.receive_from(
                r, [call.server], tag=call.tag, round=call.round, stage=RelayStage.FORWARD
            ).values()
            out[r] = decrypt_bundle(self.keys.secret_of(call, r), env.payload, own_layout=layouts[r],
                                    max_items=len(outputs), pid=r)
        return out

    def bundle_for(self, server_ctx: PublicContext, header: bytes, outputs: Mapping[str, EncryptedVector], r: str,
                   *, exclude_self: bool, shuffle: bool) -> bytes:
        """Server-side: recipient ``r``'s bundle (rerandomized copies, CSPRNG-shuffled), packed."""
        bundle = [c for o, c in sorted(outputs.items()) if not (exclude_self and o == r)]
        if self.params["rerandomize"]:
            bundle = [c.rerandomize(server_ctx) for c in bundle]
        blobs = [c.to_bytes() for c in bundle]
        return pack_blobs([header] + (secure_shuffle(blobs) if shuffle else blobs))

    @staticmethod
    def mix(plan: Mapping[str, Mapping[str, float]], cts: Mapping[str, EncryptedVector]) -> dict[str, EncryptedVector]:
        out: dict[str, EncryptedVector] = {}
        for o, row in plan.items():
            terms = [cts[s] * a for s, a in sorted(row.items()) if s in cts and a != 0.0]
            if not terms:
                raise ProtocolError(f"mix plan output {o!r} combines no online sender")
            total = terms[0]
            for t in terms[1:]:
                total = total + t
            out[o] = total
        return out


# ------------------------------------------------------------- role halves (one party each)
def encrypt_item(ctx: PublicContext | SecretContext, item: bytes, *, what: str) -> tuple[bytes, bytes]:
    """Sender: its encoded tensors as (public layout, upload payload = layout + ``Enc(item)``)."""
    try:
        vec, layout = flatten(decode_tensors(item), what=what)
    except (CodecError, InvalidInputError) as exc:
        raise InvalidInputError(
            f"ckks_relay carries float tensors encoded with securefg.federation.codec."
            f"encode_tensors; the {what} is not one ({exc}). Use sealed_relay for opaque bytes"
        ) from exc
    head = encode_layout(layout)
    return head, pack_blobs([head, ctx.encrypt(vec).to_bytes()])


def parse_uploads(
    server_ctx: PublicContext, payloads: Mapping[str, bytes], *, tag: str
) -> tuple[bytes, dict[str, EncryptedVector]]:
    """Server: every sender's upload as a ciphertext; all must share one layout header."""
    cts: dict[str, EncryptedVector] = {}
    header = b""
    for s in sorted(payloads):
        items = unpack_blobs(payloads[s], max_count=2)
        if len(items) != 2:
            raise CodecError(f"{s}'s upload for {tag!r} holds {len(items)} items, expected a layout header and a ciphertext")
        head, body = items
        header = header or head
        if head != header:
            raise ProtocolError(f"{s}'s tensors differ in names/shapes/dtypes from the others' for {tag!r}")
        cts[s] = server_ctx.load(body, expected_length=decode_layout(head).size)
    return header, cts


def decrypt_bundle(secret: SecretContext, payload: bytes, *, own_layout: bytes, max_items: int, pid: str) -> list[bytes]:
    """Recipient: decrypt every item of its bundle and re-encode it as tensors."""
    items = unpack_blobs(payload, max_count=max_items + 1)
    if not items:
        raise CodecError(f"{pid} received an empty bundle (no layout header)")
    head, *bodies = items
    if head != own_layout:
        raise ProtocolError(f"{pid} received tensors whose layout differs from its own")
    layout = decode_layout(head)
    return [
        encode_tensors(unflatten(secret.decrypt(secret.load(b, expected_length=layout.size)), layout))
        for b in bodies
    ]

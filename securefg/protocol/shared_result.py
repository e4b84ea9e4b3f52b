"""The second half of a ``shared_sum``: the server sends one result to every client.

Shared by every mechanism that carries ``shared_sum`` (plaintext, ``secure_sum``,
``blind_sum``): they differ in what the server holds before this step (every input, the sum, or
only a blinded sum) and hence in the envelope's :class:`~securefg.federation.envelope.Form`.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.protocol.mechanism import ExchangeCall, SumOutcome

STAGE = "shared_sum/result"


def send_to_clients(call: ExchangeCall, receivers: Iterable[str], payload: bytes, *, form: Form) -> dict[str, bytes]:
    """Acting as the server: one envelope of ``payload`` to every receiver; returns what each
    reachable receiver got (offline ones are recorded as not delivered)."""
    receivers = tuple(sorted(receivers))
    if not receivers:
        return {}
    call.transport.send(Envelope(call.server, receivers, call.round, call.tag, payload, stage=STAGE, form=form))
    out = {}
    for pid in receivers:
        if pid in call.transport.offline:
            continue
        (env,) = call.transport.receive(pid, tag=call.tag, round=call.round, stage=STAGE)
        out[pid] = env.payload
    return out


def share_sum(call: ExchangeCall, receivers: Iterable[str], outcome: SumOutcome, *, form: Form) -> dict[str, SumOutcome]:
    """Acting as the server, send a sum it holds to every receiver; each reachable receiver
    decodes it (a float64 vector of the sum's length) and learns who contributed."""
    got = send_to_clients(call, receivers, encode_tensor(outcome.total), form=form)
    spec = TensorSpec({"x": (torch.float64, (outcome.total.numel(),))})
    return {pid: SumOutcome(decode_tensor(b, spec=spec), outcome.contributors) for pid, b in got.items()}

"""Malformed payloads from a malicious party: does every receiver reject them with a typed error?

A malicious client controls the bytes it sends (it need not run securefg's encoder). Each probe
is a crafted payload handed to the parser a receiver uses for it: the tensor codec with the
receiver's expected spec (every ``aggregate`` upload, broadcast and relay item), and for CeFGC
the diffusion-package deserialisers (a hostile header must not make the receiver allocate or
loop). Channels are authenticated, so the sender is known; the question is only what the
receiver does with the bytes.

**Metric** (``acceptance_rate``): share of probes the receiver *accepted* (0 = every malformed
payload refused). A probe that raises anything but a :class:`~securefg.errors.SecureFGError`
counts as refused but is listed as ``untyped`` in the details: it would crash a receiver with
an unexplained error instead of a typed, documented one.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    AuditContext,
    Support,
    register_attack,
)
from securefg.errors import SecureFGError
from securefg.federation.codec import TensorSpec, decode_tensor, decode_tensors, encode_tensor, encode_tensors

Probe = tuple[str, Callable[[], Any]]


def codec_probes() -> list[Probe]:
    """Tensor-message probes against the codec a receiver runs with its expected spec."""
    good = {"x": torch.arange(8, dtype=torch.float64)}
    spec = TensorSpec.like(good)
    ok = encode_tensors(good)
    nan = encode_tensors({"x": torch.tensor([1.0, float("nan")] * 4, dtype=torch.float64)})
    header = b"SFGT" + struct.pack("<BI", 1, 1) + struct.pack("<H", 1) + b"x" + struct.pack("<BB", 2, 1)
    huge = header + struct.pack("<Q", 2**40) + struct.pack("<Q", 8 * 2**40)
    lying = header + struct.pack("<Q", 8) + struct.pack("<Q", 16) + b"\0" * 64
    buf = io.BytesIO()
    torch.save(good, buf)
    return [
        ("truncated message", lambda: decode_tensors(ok[:-5], spec=spec)),
        ("bad magic", lambda: decode_tensors(b"XXXX" + ok[4:], spec=spec)),
        ("NaN values", lambda: decode_tensors(nan, spec=spec)),
        ("wrong shape for the expected spec", lambda: decode_tensors(encode_tensors({"x": torch.zeros(9, dtype=torch.float64)}), spec=spec)),
        ("wrong dtype for the expected spec", lambda: decode_tensors(encode_tensors({"x": torch.zeros(8, dtype=torch.float32)}), spec=spec)),
        ("extra field", lambda: decode_tensors(encode_tensors({**good, "y": torch.zeros(1)}), spec=spec)),
        ("size field disagrees with shape", lambda: decode_tensors(lying, spec=spec)),
        ("claims 2^40 elements", lambda: decode_tensors(huge, spec=spec)),
        ("trailing bytes", lambda: decode_tensors(ok + b"\0", spec=spec)),
        ("pickle (torch.save) payload", lambda: decode_tensors(buf.getvalue(), spec=spec)),
        ("vector upload of the wrong length", lambda: decode_tensor(encode_tensor(torch.zeros(7, dtype=torch.float64)),
                                                                    spec=TensorSpec({"x": (torch.float64, (8,))}))),
    ]


def diffusion_probes(arch: Any) -> list[Probe]:
    """CeFGC package probes against the receivers' deserialisers."""
    from securefg.methods.cefgc.package import pack_dense, pack_exact, unpack_dense, unpack_exact

    model = arch.new_model(class_label=0, init_seed=0)
    model.node_count_hist[0, 3] = 1
    exact = pack_exact({0: model})

    def tamper(field: str, value: torch.Tensor) -> dict[str, torch.Tensor]:
        return {**exact, f"m0/{field}": value}

    big = {f"m{i}/format_version": exact["m0/format_version"] for i in range(2000)}
    dense = pack_dense({0: model}, arch)
    bad_steps = dict(dense)
    bad_steps["s0/sampling"] = torch.tensor([1e9, 0.1, 0.9])
    return [
        ("package field without a model prefix", lambda: unpack_exact({"weights": torch.zeros(3)})),
        ("package claiming 2000 models", lambda: unpack_exact(big)),
        ("header asking for 10^6 nodes", lambda: unpack_exact(tamper("max_node_num", torch.tensor(10**6)))),
        ("header asking for 10^6 channels", lambda: unpack_exact(tamper("config.channels", torch.tensor([2, 10**6, 2])))),
        ("negative class label", lambda: unpack_exact(tamper("class_label", torch.tensor(-5)))),
        ("weights of the wrong shape", lambda: unpack_exact({**exact, next(k for k in exact if "param." in k): torch.zeros(3)})),
        ("dense package with 1e9 Langevin steps", lambda: unpack_dense(bad_steps, arch)),
        ("dense package missing a field", lambda: unpack_dense({k: v for k, v in dense.items() if not k.endswith("params")}, arch)),
    ]


@register_attack
class MalformedPayloads(Attack):
    """Typed rejection of crafted payloads by every receiver-side parser."""

    name = "malformed_payloads"
    metric = "acceptance_rate"
    metric_doc = "share of crafted malformed payloads a receiver accepted (0 = all refused)"
    chance = 0.0
    requires_malicious = True

    def supports(self, ctx: AdversaryContext) -> Support:
        return Support(True) if ctx.view.members else Support(False, "no adversarial party")

    def run(self, ctx: AuditContext) -> AttackOutcome:
        probes = codec_probes()
        if ctx.adversary.run.method.startswith("cefgc"):
            from securefg.attacks.diffusion_membership import cefgc_architecture

            probes += diffusion_probes(cefgc_architecture(ctx.adversary.run)[0])
        rows = []
        for label, fn in probes:
            try:
                fn()
                outcome = "accepted"
            except SecureFGError as exc:
                outcome = f"rejected: {type(exc).__name__}"
            except Exception as exc:  # noqa: BLE001 - an untyped failure is itself the finding
                outcome = f"untyped: {type(exc).__name__}: {str(exc)[:80]}"
            rows.append({"probe": label, "outcome": outcome})
        accepted = sum(r["outcome"] == "accepted" for r in rows)
        untyped = sum(r["outcome"].startswith("untyped") for r in rows)
        return AttackOutcome(value=accepted / len(rows), chance=self.chance,
                             details={"probes": rows, "accepted": accepted, "untyped": untyped, "total": len(rows)})

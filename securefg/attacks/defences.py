"""Defences against malicious clients, and derived protocol stacks that switch them on.

Which defence composes with which mechanism (the audit measures each):

* **Norm bounding** (``clip_norm`` transform, :mod:`securefg.protocol.dp.clip_norm`): runs on the
  client, so it composes with masked sums and CKKS. It binds a malicious client only if the
  bound is *verified* (a zero-knowledge range proof on the masked input, not implemented): in
  this simulation the exchange applies the transform to every client, so the audited number is
  what a verified bound would give; an unverified bound gives the undefended number.
* **Robust aggregation** (:class:`PlaintextTrimmedMean` below): the server needs every input on
  its own, so only over plaintext updates. Over a masked sum the stack validator rejects it.
* **Typed rejection of malformed payloads**: the codec and the model deserialisers refuse
  anything malformed with a :class:`~securefg.errors.SecureFGError` (audited by
  ``malformed_payloads``); it composes with everything and stops crashes, not poisoning.

The trimmed-mean mechanism lives here because it is a defence the audit switches on; it is a
regular registered mechanism (``plaintext_trimmed_mean``) any stack can name once
``securefg.attacks`` is imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch

from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, SumOutcome, register_mechanism
from securefg.protocol.plaintext import upload_vectors
from securefg.protocol.robust.gram_rules import trim_problems
from securefg.protocol.stack import ProtocolStack
from securefg.toml_files import toml_value


@register_mechanism
class PlaintextTrimmedMean(Mechanism):
    """Plaintext aggregate whose result is ``n`` times the coordinate-wise trimmed mean.

    Yin et al., "Byzantine-Robust Distributed Learning", ICML 2018
    (https://arxiv.org/abs/1803.01498). The exchange appends each client's weight to its vector and
    divides the result by the summed weight, so returning ``n * trimmed_mean`` makes the method
    see the trimmed mean (exactly, for uniform weights).

    Args:
        trim (float): Share cut at each end of every coordinate, in ``[0, 0.5)``, rounded up (at
            least one input per end once ``trim > 0``, at most ``(n - 1) // 2``). (default: ``0.2``)
    """

    name = "plaintext_trimmed_mean"
    returns_sum = False
    exchanges = frozenset({ExchangeKind.AGGREGATE})
    defaults: ClassVar[Mapping[str, Any]] = {"trim": 0.2}
    protects = "nothing (plaintext); bounds the influence of a minority of poisoned inputs"
    reveals_individual_inputs = True

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        return super().validate_params(params) + trim_problems({**cls.defaults, **params}["trim"])

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        return self.combine_uploads(upload_vectors(call, inputs, call.server, "plaintext/upload"))

    def combine_uploads(self, got: Mapping[str, torch.Tensor]) -> SumOutcome:
        """``n`` times the coordinate-wise trimmed mean of the clear uploads."""
        order = sorted(got)
        x = torch.stack([got[p] for p in order]).sort(0).values
        n = len(order)
        k = min(math.ceil(float(self.params["trim"]) * n - 1e-9), (n - 1) // 2)
        return SumOutcome(x[k : n - k].mean(0) * n, tuple(order))



def derived_stack(
    stack: ProtocolStack,
    tag: str,
    *,
    label: str,
    out_dir: Path,
    mechanism: str | None = None,
    params: Mapping[str, Any] | None = None,
    add_transforms: tuple[Mapping[str, Any], ...] = (),
) -> Path:
    """Write ``stack`` with ``tag``'s binding changed to ``out_dir/<name>+<label>.toml``.

    Args:
        stack (ProtocolStack): The stack to start from.
        tag (str): The message tag whose binding changes (an exact binding is added for it).
        label (str): Suffix of the new stack's name.
        out_dir (Path): Where to write the file.
        mechanism (str, optional): New mechanism (default: keep the current one).
        params (Mapping, optional): New mechanism parameters (default: keep, unless the
            mechanism changes).
        add_transforms (tuple[Mapping, ...]): Transforms appended to the binding.
    """
    desc = stack.describe()
    bindings = dict(desc["bindings"])
    current = stack.binding_for(tag)
    cur = bindings[current.pattern]
    new = {
        "mechanism": mechanism or cur["mechanism"],
        "params": dict(params) if params is not None else ({} if mechanism else dict(cur["params"])),
        "transforms": [*cur["transforms"], *map(dict, add_transforms)],
    }
    if "unsafe" in cur:  # the waiver travels with the binding it was written for
        new["unsafe"] = cur["unsafe"]
    bindings[tag] = new
    name = f"{stack.name}+{label}"
    lines = [f"name = {toml_value(name)}",
             f"description = {toml_value(f'{stack.name} with {tag!r} changed by the audit ({label})')}"]
    if stack.unsafe is not None:
        lines.append(f"unsafe = {toml_value(stack.unsafe)}")
    lines.append("")
    for pattern, b in bindings.items():
        lines.append(f"[tags.{toml_value(pattern)}]")
        lines.append(f"mechanism = {toml_value(b['mechanism'])}")
        if b["params"]:
            lines.append(f"params = {toml_value(b['params'])}")
        if b["transforms"]:
            lines.append(f"transforms = {toml_value(b['transforms'])}")
        if "unsafe" in b:
            lines.append(f"unsafe = {toml_value(b['unsafe'])}")
        lines.append("")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name.replace('/', '_')}.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    ProtocolStack.load(path)  # validate now: a defence that cannot compose fails here, with the reason
    return path


__all__ = ["PlaintextTrimmedMean", "derived_stack"]

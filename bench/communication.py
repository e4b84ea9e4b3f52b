"""Bytes on the wire vs the float32 plaintext payload (a script, not a test): ``python bench/communication.py``.

1. For every shipped stack (``protocols/*.toml``) and every tag it binds that carries tensors of
   a method (a secure sum: ``aggregate`` or ``peer_sum``; a ``broadcast``), one exchange among
   ``n = 10`` clients of ``m`` values inside the tag's clip, over the in-process transport. From
   the transcript: bytes per client for the call (every envelope, relay hops included, divided
   by the clients taking part) and the expansion over the float32 plaintext payload of the same
   tensors (4 bytes per value per input vector; for a broadcast, per receiver).
2. The secure sum at ``n = 100`` clients, ``m = 1e6`` values, in the ring sized for clip 1 at
   resolution 2^-26 (34 bits; ``bits = "auto"``): the Done-when figure of issue 24.
3. With ``--fedstruct-result result.json``: the total bytes of a FedStruct run (e.g. the CiteSeer
   command in ``docs/fedstruct.md``) and its ratio to the 28.3 GB that run moved before rings were
   sized to the data (2^64 ring, 8 bytes per value).

Every result is a ``key=value`` line; the ``expansion_vs_float32=`` lines come last.
Options: ``--quick`` (m = 1e4, and n = 30, m = 1e5 for part 2).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from securefg.errors import ConfigError
from securefg.federation.party import Party, client_id
from securefg.federation.transport import InProcessTransport
from securefg.methods.base import method_class
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.secure_sum import SecureSum
from securefg.protocol.stack import ProtocolStack, protocols_dir

BEFORE_CITESEER_BYTES = 28.3e9
"""The FedStruct CiteSeer run (variant B, Hop2Vec, random partition, 10 clients, seed 0) before
issue 24: every secure sum in a 2^64 ring (issue 24's report)."""
METHODS = ("fedavg", "fedstruct", "fedsheafhn", "fedpub", "cefgc")


def tag_kinds() -> dict[str, ExchangeKind]:
    """Exchange kind of every tag the methods declare (stacks bind tags, not kinds)."""
    kinds: dict[str, ExchangeKind] = {}
    for name in METHODS:
        with contextlib.suppress(ConfigError):  # a method not in this build is skipped
            kinds.update(getattr(method_class(name), "TAGS", {}))
    return kinds


def _world(n: int) -> tuple[InProcessTransport, dict[str, Party], list[str]]:
    clients = [client_id(i) for i in range(n)]
    transport = InProcessTransport(["server", *clients])
    return transport, {p: Party(p) for p in transport.parties}, clients


def secure_sum_row(params: dict[str, Any], kind: ExchangeKind, *, n: int, m: int, seed: int = 0) -> dict[str, float]:
    """One secure sum of ``n`` vectors (a peer sum has an extra target client); bytes from the transcript."""
    mech = SecureSum(**params)
    transport, parties, clients = _world(n + (kind is ExchangeKind.PEER_SUM))
    target = clients[-1] if kind is ExchangeKind.PEER_SUM else None
    senders = [c for c in clients if c != target]
    scale = min(float(mech.settings.clip), 1.0)
    rng = np.random.default_rng(seed)
    values = {c: rng.uniform(-scale, scale, size=m) for c in senders}
    if (mech.settings.resolution or 0) >= 1:  # a count tag: integer inputs, as the method sends
        values = {c: np.rint(v * 100) for c, v in values.items()}
    inputs = {c: torch.from_numpy(v) for c, v in values.items()}
    call = ExchangeCall(transport=transport, parties=parties, round=0, tag="bench", params=mech.params)
    start = time.perf_counter()
    out = mech.run_peer_sum(call, target, inputs) if target else mech.run_aggregate(call, inputs)
    seconds = time.perf_counter() - start
    err = float((out.total - sum(inputs.values())).abs().max())
    total = transport.transcript.bytes_total()
    return {"ring_bits": mech.settings.ring_bits(n), "bytes_per_client": total / len(clients),
            "expansion": total / (len(senders) * m * 4), "max_err": err, "seconds": seconds}


def broadcast_row(stack: ProtocolStack, tag: str, *, n: int, m: int) -> dict[str, float]:
    """One broadcast of ``m`` float32 values to ``n`` clients under the stack's binding of ``tag``."""
    from securefg.federation.exchange import Exchange

    transport, parties, _ = _world(n)
    ex = Exchange(transport=transport, stack=stack, parties=parties)
    ex.round = 0
    ex.broadcast(tag, {"theta": torch.linspace(-1, 1, m)})
    total = transport.transcript.bytes_total()
    return {"bytes_per_client": total / n, "expansion": total / (n * m * 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--fedstruct-result", type=Path, help="result.json of a FedStruct run to report the total of")
    args = parser.parse_args()
    n, m = 10, 10**4 if args.quick else 10**5
    big_n, big_m = (30, 10**5) if args.quick else (100, 10**6)
    kinds = tag_kinds()
    lines: list[str] = []
    for path in sorted(protocols_dir().glob("*.toml")):
        stack = ProtocolStack.load(path)
        for b in stack.bindings:
            kind = kinds.get(b.pattern)
            if b.mechanism == "secure_sum" and kind in (ExchangeKind.AGGREGATE, ExchangeKind.PEER_SUM):
                r = secure_sum_row(dict(b.params), kind, n=n, m=m)
                lines.append(
                    f"stack={stack.name} tag={b.pattern} kind={kind.value} n={n} m={m} ring_bits={r['ring_bits']} "
                    f"bytes_per_client={r['bytes_per_client']:.0f} max_err={r['max_err']:.2e} "
                    f"expansion_vs_float32={r['expansion']:.3f}"
                )
            elif kind is ExchangeKind.BROADCAST and b.mechanism == "plaintext":
                r = broadcast_row(stack, b.pattern, n=n, m=m)
                lines.append(
                    f"stack={stack.name} tag={b.pattern} kind=broadcast wire_dtype={b.wire_dtype or 'as-sent'} n={n} "
                    f"m={m} bytes_per_client={r['bytes_per_client']:.0f} expansion_vs_float32={r['expansion']:.3f}"
                )
    big = secure_sum_row({"clip": 1.0, "resolution": 2.0**-26}, ExchangeKind.AGGREGATE, n=big_n, m=big_m)
    big64 = secure_sum_row({"bits": 64, "clip": 1.0}, ExchangeKind.AGGREGATE, n=big_n, m=big_m) if args.quick else None
    if args.fedstruct_result is not None:
        res = json.loads(args.fedstruct_result.read_text())
        total = int(res["bytes_total"])
        print(f"fedstruct_run={res.get('dataset')} protocol={res.get('protocol')} bytes_total={total} "
              f"gb={total / 1e9:.2f} test_acc={res.get('metrics', {}).get('test_acc')} "
              f"reduction_vs_before={BEFORE_CITESEER_BYTES / total:.2f}")
    for line in lines:
        print(line)
    if big64 is not None:
        print(f"secure_sum n={big_n} m={big_m} ring_bits=64 expansion_vs_float32={big64['expansion']:.3f}")
    print(f"secure_sum n={big_n} m={big_m} clip=1 resolution=2^-26 ring_bits={big['ring_bits']} "
          f"max_err={big['max_err']:.2e} seconds={big['seconds']:.1f} expansion_vs_float32={big['expansion']:.3f}")


if __name__ == "__main__":
    main()

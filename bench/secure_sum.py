"""Benchmark of the secure sum (a script, not a test): ``python bench/secure_sum.py``.

1. Mask expansion: for each PRG (AES-128-CTR, the default; AES-256-CTR; ChaCha20), the raw
   keystream rate of ``cryptography`` on this machine vs our expansion + in-place modular add of
   one mask into a 2^64 accumulator; prints their ratio.
2. End to end, ``aggregate`` over the in-process transport for n in {10, 100} clients and
   m in {1e5, 1e6} values in [-1, 1] at resolution 2^-26 (``bits = "auto"``: a 34-bit ring at
   n = 100, masked inputs bit-packed): mean client seconds (time in its stage handlers), server
   seconds (time in the aggregator's stage handlers), payload bytes per client from the
   transcript, the expansion vs the plaintext mechanism's bytes per client on the same inputs
   (float64 uploads) and vs the float32 payload (4 bytes per value).
3. If ``flwr`` imports, Flower's SecAgg+ mask generator (``pseudo_rand_gen``) on the same m.

The last lines are ``expansion_vs_float32=<ratio>`` (the largest n and m) and
``mask_rate_vs_aes=<ratio>`` (the default PRG's expansion vs its raw keystream). Options: ``--quick`` (small sizes only).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from securefg.federation.party import Party, client_id
from securefg.federation.transport import InProcessTransport
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.plaintext import Plaintext
from securefg.protocol.secure_sum import SecureSum
from securefg.protocol.secure_sum.client.base import ClientStage
from securefg.protocol.secure_sum.prg import MaskExpander, Prg, keystream_cipher
from securefg.protocol.secure_sum.server.base import ServerStage
from securefg.protocol.secure_sum.settings import Settings


def best_of(fn: Callable[[], None], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def mask_rates(m: int, repeats: int) -> dict[str, float]:
    """Bytes per second of raw keystream and of our expansion + add (2^64 ring)."""
    nbytes = m * 8
    zeros, out = bytearray(nbytes), bytearray(nbytes + 16)
    seed = os.urandom(32)
    acc = np.zeros(m, dtype=np.uint64)
    rates = {}
    for prg in Prg:
        raw = best_of(lambda p=prg: keystream_cipher(p, seed).update_into(zeros, out), repeats)  # type: ignore[misc]
        expander = MaskExpander(prg, 64)
        ours = best_of(lambda e=expander: e.add_into(acc, seed), repeats)  # type: ignore[misc]
        rates[f"{prg.value}_raw"] = nbytes / raw
        rates[f"{prg.value}_ours"] = nbytes / ours
    return rates


BENCH_RING: dict[str, object] = {"clip": 1.0, "resolution": 2.0**-26}
"""Inputs in [-1, 1] summed at resolution 2^-26: the smallest ring, 34 bits at n = 100."""


class StageTimer:
    """Accumulates time spent in client and aggregator stage handlers (bench-only wrapper)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.client: dict[str, float] = defaultdict(float)
        self.server = 0.0
        self._client_handle = ClientStage.handle
        self._server_handle = ServerStage.handle

    def __enter__(self) -> StageTimer:
        timer = self

        def client_handle(stage: ClientStage, msg):  # type: ignore[no-untyped-def]
            t = timer.clock()
            try:
                return timer._client_handle(stage, msg)
            finally:
                timer.client[stage.ctx.pid] += timer.clock() - t

        def server_handle(stage: ServerStage, deliveries):  # type: ignore[no-untyped-def]
            t = timer.clock()
            try:
                return timer._server_handle(stage, deliveries)
            finally:
                timer.server += timer.clock() - t

        ClientStage.handle = client_handle  # type: ignore[method-assign]
        ServerStage.handle = server_handle  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        ClientStage.handle = self._client_handle  # type: ignore[method-assign]
        ServerStage.handle = self._server_handle  # type: ignore[method-assign]


def end_to_end(n: int, m: int, *, drop_fraction: float = 0.0,
               clock: Callable[[], float] = time.perf_counter, params: dict[str, object] | None = None) -> dict[str, float]:
    clients = [client_id(i) for i in range(n)]
    rng = np.random.default_rng(n * 7919 + m)
    inputs = {c: torch.from_numpy(rng.uniform(-1.0, 1.0, size=m)) for c in clients}
    dropped = frozenset(clients[: int(drop_fraction * n)])
    row: dict[str, float] = {}
    for mech in (Plaintext(), SecureSum(**(params if params is not None else BENCH_RING))):
        transport = InProcessTransport(["server", *clients])
        parties = {p: Party(p) for p in transport.parties}
        dropouts = {"secure_sum/masked_input": dropped} if isinstance(mech, SecureSum) else {}
        call = ExchangeCall(transport=transport, parties=parties, round=0, tag="bench", params=mech.params, dropouts=dropouts)
        with StageTimer(clock) as timer:
            t = time.perf_counter()
            out = mech.run_aggregate(call, inputs)
            wall = time.perf_counter() - t
        per_party = transport.transcript.bytes_by_party()
        per_client = statistics.mean(per_party[c]["sent"] + per_party[c]["received"] for c in clients)
        if isinstance(mech, SecureSum):
            expected = sum(inputs[c] for c in out.contributors)
            err = float((out.total - expected).abs().max())
            assert mech.last_report is not None and err <= mech.last_report.error_bound
            live = [c for c in clients if c not in dropped]
            row.update(
                client_s=statistics.mean(timer.client[c] for c in live),
                server_s=timer.server,
                wall_s=wall,
                bytes_per_client=per_client,
                degree=mech.last_report.degree,
                threshold=mech.last_report.threshold,
                max_err=err,
                ring_bits=mech.settings.ring_bits(n),
                vs_float32=per_client / (m * 4),
            )
        else:
            row["plain_bytes_per_client"] = per_client
    row["expansion"] = row["bytes_per_client"] / row["plain_bytes_per_client"]
    return row


def flower_seconds(m: int, repeats: int) -> float | None:
    """Seconds for Flower's SecAgg+ to generate and add one mask of m values (2^32 range), if installed."""
    try:
        from flwr.common.secure_aggregation.secaggplus_utils import pseudo_rand_gen
    except Exception:  # noqa: BLE001 - optional comparison
        return None
    seed = os.urandom(32)
    acc = np.zeros(m, dtype=np.int64)

    def one() -> None:
        (mask,) = pseudo_rand_gen(seed, 1 << 32, [(m,)])
        np.add(acc, mask, out=acc)
        np.mod(acc, 1 << 32, out=acc)

    return best_of(one, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--flwr-path", help="extra folder to import flwr from (appended to sys.path)")
    args = parser.parse_args()
    if args.flwr_path:
        sys.path.append(args.flwr_path)
    sizes = [(10, 10**4), (30, 10**4)] if args.quick else [(10, 10**5), (10, 10**6), (100, 10**5), (100, 10**6)]

    m = 10**6
    rates = mask_rates(m, repeats=5 if args.quick else 15)
    print(f"# mask expansion, m = {m} values in Z_2^64 ({m * 8 / 1e6:.0f} MB per mask), {os.cpu_count()} cores")
    for prg in Prg:
        raw, ours = rates[f"{prg.value}_raw"], rates[f"{prg.value}_ours"]
        print(f"{prg.value:>9}: raw keystream {raw / 1e9:6.2f} GB/s | expansion + modular add {ours / 1e9:6.2f} GB/s | ratio {ours / raw:.2f}")
    fl = flower_seconds(m, repeats=3)
    if fl is not None:
        ours_s = m * 8 / rates[f"{Settings().prg.value}_ours"]
        print(
            f"   flower: secaggplus pseudo_rand_gen + add mod 2^32 (seed folded to 32 bits, MT19937): "
            f"{fl * 1e3:.1f} ms per mask of {m} values vs ours {ours_s * 1e3:.1f} ms (2^64 ring, {Settings().prg.value})"
        )
    else:
        print("   flower: flwr not importable; comparison skipped")

    print("\n# end to end aggregate (in-process transport, clip 1 at resolution 2^-26, ring sized to n, Harary k/t from the helper)")
    header = (f"{'n':>4} {'m':>8} {'drop':>5} {'k':>3} {'t':>3} {'bits':>4} {'client s':>9} {'server s':>9} {'wall s':>7} "
              f"{'MB/client':>10} {'expansion':>9} {'vs f32':>7} {'max err':>9}")
    print(header)
    runs = [(n, mm, 0.0) for n, mm in sizes] + ([(100, 10**6, 0.1)] if not args.quick else [(30, 10**4, 0.1)])
    largest: dict[str, float] = {}
    for n, mm, drop in runs:
        r = end_to_end(n, mm, drop_fraction=drop)
        print(
            f"{n:>4} {mm:>8} {drop:>5.0%} {r['degree']:>3.0f} {r['threshold']:>3.0f} {r['ring_bits']:>4.0f} {r['client_s']:>9.3f} "
            f"{r['server_s']:>9.3f} {r['wall_s']:>7.2f} {r['bytes_per_client'] / 1e6:>10.3f} {r['expansion']:>9.3f} "
            f"{r['vs_float32']:>7.3f} {r['max_err']:>9.2e}"
        )
        if drop == 0 and (n, mm) >= (largest.get("n", 0), largest.get("m", 0)):
            largest = {"n": n, "m": mm, "vs_float32": r["vs_float32"]}
    print(f"n={largest['n']:.0f} m={largest['m']:.0f} expansion_vs_float32={largest['vs_float32']:.3f}")
    default = Settings().prg.value  # the headline is the default PRG's expansion vs its own raw keystream
    ratio = rates[f"{default}_ours"] / rates[f"{default}_raw"]
    print(f"mask_prg={default}")
    print(f"mask_rate_vs_aes={ratio:.3f}")


if __name__ == "__main__":
    main()

"""CKKS benchmark: raw TenSEAL vs securefg's wrapper, ciphertext expansion, end-to-end aggregation.

Run: ``python bench/ckks.py [--quick]``. Prints one line per measurement; the last line is
``wrapper_overhead=<ratio>``: (securefg encrypt + add + decrypt) / (raw TenSEAL encrypt + add +
decrypt) on the same tensors, same parameters (N=8192, [60,40,40,60], 2^40), median of repeats.
CPU time, interleaved. The "our" side is the API mechanisms use (``SecretContext.encrypt``, ``EncryptedVector.__add__``,
``SecretContext.decrypt``: chunking, zero padding, level checks, rescale correction, torch I/O).

The end-to-end part runs ``Exchange.aggregate`` over the in-process transport (authenticated
channels, transcript) for 10 clients, CKKS stack vs plaintext stack, key setup timed separately.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tenseal as ts
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from securefg.federation.exchange import Exchange
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.transport import InProcessTransport
from securefg.protocol.ckks.presets import PRESETS
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.stack import ProtocolStack

PRESET = PRESETS["default"]


def _paired_times(pairs: dict[str, tuple[Callable[[], object], Callable[[], object]]], repeats: int) -> dict[str, float]:
    """Median CPU time of each (raw, ours) pair, measured interleaved so load hits both alike.

    CPU time (``time.process_time``) rather than wall time: these TenSEAL calls are
    single-threaded, and CPU time is robust to other processes sharing the machine.
    """
    samples: dict[str, list[float]] = {f"{side}_{op}": [] for op in pairs for side in ("raw", "our")}
    for rep in range(repeats):
        for op, (raw, ours) in pairs.items():
            order = [("raw", raw), ("our", ours)] if rep % 2 == 0 else [("our", ours), ("raw", raw)]
            for side, fn in order:
                t0 = time.process_time()
                fn()
                samples[f"{side}_{op}"].append(time.process_time() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


def raw_vs_ours(n: int, repeats: int) -> float:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, generator=g, dtype=torch.float64), torch.randn(n, generator=g, dtype=torch.float64)
    slots = PRESET.slots

    raw_ctx = ts.context(ts.SCHEME_TYPE.CKKS, PRESET.poly_modulus_degree, coeff_mod_bit_sizes=list(PRESET.coeff_mod_bit_sizes))
    raw_ctx.global_scale = PRESET.scale
    ours = SecretContext.generate(PRESET)

    def raw_encrypt(v: torch.Tensor) -> list[ts.CKKSVector]:
        arr = v.numpy()
        return [ts.ckks_vector(raw_ctx, arr[i : i + slots].tolist()) for i in range(0, n, slots)]

    def raw_decrypt(cts: list[ts.CKKSVector]) -> np.ndarray:
        return np.concatenate([np.asarray(c.decrypt()) for c in cts])

    rx, ry = raw_encrypt(x), raw_encrypt(y)
    ox, oy = ours.encrypt(x), ours.encrypt(y)
    rs, os_ = [a + b for a, b in zip(rx, ry)], ox + oy
    t = _paired_times(
        {
            "encrypt": (lambda: raw_encrypt(x), lambda: ours.encrypt(x)),
            "add": (lambda: [a + b for a, b in zip(rx, ry)], lambda: ox + oy),
            "decrypt": (lambda: raw_decrypt(rs), lambda: ours.decrypt(os_)),
        },
        repeats,
    )
    for op in ("encrypt", "add", "decrypt"):
        raw, our = t[f"raw_{op}"], t[f"our_{op}"]
        print(
            f"n={n} {op:8s} cpu raw_tenseal={raw * 1e3:8.2f} ms ({n / raw / 1e6:6.2f} Mvalues/s)  "
            f"securefg={our * 1e3:8.2f} ms ({n / our / 1e6:6.2f} Mvalues/s)  ratio={our / raw:.3f}"
        )
    err_raw = float(np.abs(raw_decrypt(rs) - (x + y).numpy()).max())
    err_ours = float((ours.decrypt(os_) - (x + y)).abs().max())
    print(f"n={n} max_abs_error raw_tenseal={err_raw:.2e} securefg={err_ours:.2e}")

    ct_bytes = len(ox.to_bytes())
    print(
        f"n={n} ciphertext_bytes={ct_bytes} chunks={ox.num_chunks} float32_bytes={4 * n} "
        f"expansion_vs_float32={ct_bytes / (4 * n):.1f}x (full chunk: {len(ours.encrypt(torch.zeros(slots, dtype=torch.float64)).to_bytes()) / (4 * slots):.1f}x)"
    )
    raw_total = t["raw_encrypt"] + t["raw_add"] + t["raw_decrypt"]
    our_total = t["our_encrypt"] + t["our_add"] + t["our_decrypt"]
    return our_total / raw_total


def _federation(stack: ProtocolStack, n_clients: int) -> Exchange:
    pids = [SERVER] + [client_id(k) for k in range(n_clients)]
    return Exchange(transport=InProcessTransport(pids), stack=stack, parties={p: Party(p) for p in pids})


def end_to_end(n_params: int, n_clients: int = 10) -> None:
    g = torch.Generator().manual_seed(1)
    updates = {client_id(k): {"w": torch.randn(n_params, generator=g) * 0.1} for k in range(n_clients)}
    weights = {client_id(k): float(50 + 10 * k) for k in range(n_clients)}
    tags = {"t": {"mechanism": "ckks"}, "warmup": {"mechanism": "ckks"}}
    stacks = {
        "plaintext": ProtocolStack.from_dict({"name": "p", "tags": {"*": {"mechanism": "plaintext"}}}),
        "ckks": ProtocolStack.from_dict({"name": "c", "tags": tags}),
    }
    results, times, cpu, sent = {}, {}, {}, {}
    for name, stack in stacks.items():
        ex = _federation(stack, n_clients)
        t0 = time.perf_counter()
        ex.aggregate("warmup", {c: {"w": torch.zeros(1)} for c in updates})  # key setup (CKKS only)
        setup = time.perf_counter() - t0
        before = ex.transport.transcript.bytes_total()
        t0, c0 = time.perf_counter(), time.process_time()
        results[name] = ex.aggregate("t", updates, weights=weights)["w"]
        times[name], cpu[name] = time.perf_counter() - t0, time.process_time() - c0
        sent[name] = ex.transport.transcript.bytes_total() - before
        if name == "ckks":
            print(f"e2e n={n_params:.0e} clients={n_clients} ckks_key_setup={setup:.2f} s")
    rel = float((results["ckks"].double() - results["plaintext"].double()).norm() / results["plaintext"].double().norm())
    print(
        f"e2e n={n_params:.0e} clients={n_clients} wall plaintext={times['plaintext']:.3f} s "
        f"ckks={times['ckks']:.2f} s slowdown={times['ckks'] / times['plaintext']:.0f}x "
        f"(cpu plaintext={cpu['plaintext']:.3f} s ckks={cpu['ckks']:.2f} s) "
        f"bytes plaintext={sent['plaintext'] / 1e6:.1f} MB ckks={sent['ckks'] / 1e6:.1f} MB "
        f"({sent['ckks'] / sent['plaintext']:.1f}x) rel_error={rel:.1e}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 1e6-parameter end-to-end run")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ratio = raw_vs_ours(100_000, args.repeats)
    for n in (100_000,) if args.quick else (100_000, 1_000_000):
        end_to_end(n)
    print(f"wrapper_overhead={ratio:.3f}")
    if not math.isfinite(ratio) or ratio > 1.25:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

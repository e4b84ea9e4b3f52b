"""The raw-TenSEAL floor of a CKKS round: the same operations on vectors of the same sizes, nothing else.

``python bench/ckks_floor.py --clients 10 --weights 184455 --embedding 7 --metrics 4``

What a FED-PUB round under ``fedpub_ckks`` asks of CKKS, done directly with TenSEAL (no
envelopes, no securefg wrappers, one context per preset, no key setup): for the similarity,
each client encrypts its (windowed) embedding, the server loads them and computes every pair's
product with its one-hot mask, the key holder loads and decrypts the scalars; for the weights,
each client encrypts its model in full-slot chunks, the server loads them and forms one
unrescaled weighted sum per receiver, each receiver loads and decrypts its own; for the metrics,
an encrypted sum decrypted by the key holder. :func:`fedpub_floor` returns the seconds and the
count per operation, so a report can say which operation the floor is made of and what one costs.
``bench/protection_cost.py`` divides the protected round's extra time by this floor
(``ckks_floor_ratio_fedpub``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tenseal as ts

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from securefg.protocol.ckks.encrypted_vector import window_size
from securefg.protocol.ckks.presets import PRESETS, CKKSPreset, resolve_preset


@dataclass
class Floor:
    """Seconds and counts per (flow, operation)."""

    seconds: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    @contextmanager
    def op(self, flow: str, name: str) -> Iterator[None]:
        """Time one operation of ``flow``."""
        t0 = time.perf_counter()
        yield
        self.seconds[(flow, name)] += time.perf_counter() - t0
        self.counts[(flow, name)] += 1

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def rows(self) -> list[tuple[str, str, int, float]]:
        """(flow, operation, count, seconds), largest first."""
        return sorted(((f, o, self.counts[(f, o)], s) for (f, o), s in self.seconds.items()), key=lambda r: -r[3])


def _context(preset: CKKSPreset, *, galois: bool) -> ts.Context:
    ctx = ts.context(ts.SCHEME_TYPE.CKKS, preset.poly_modulus_degree,
                     coeff_mod_bit_sizes=list(preset.coeff_mod_bit_sizes))
    ctx.global_scale = preset.scale
    if galois:
        ctx.generate_galois_keys()
    return ctx


def _chunks(values: np.ndarray, slots: int) -> list[list[float]]:
    count = math.ceil(values.size / slots)
    padded = np.zeros(count * slots)
    padded[: values.size] = values
    return [padded[i * slots:(i + 1) * slots].tolist() for i in range(count)]


def _upload(fl: Floor, flow: str, ctx: ts.Context, chunks: list[list[float]]) -> list[bytes]:
    """A client encrypts and serializes its chunks."""
    out = []
    for chunk in chunks:
        with fl.op(flow, "encrypt"):
            ct = ts.ckks_vector(ctx, chunk)
        with fl.op(flow, "serialize"):
            out.append(ct.serialize())
    return out


def _load(fl: Floor, flow: str, ctx: ts.Context, blobs: list[bytes]) -> list[ts.CKKSVector]:
    out = []
    for blob in blobs:
        with fl.op(flow, "load"):
            out.append(ts.ckks_vector_from(ctx, blob))
    return out


def _decrypt(fl: Floor, flow: str, ctx: ts.Context, blobs: list[bytes]) -> None:
    for ct in _load(fl, flow, ctx, blobs):
        with fl.op(flow, "decrypt"):
            ct.decrypt()


def similarity_floor(fl: Floor, ctx: ts.Context, n: int, length: int, rng: np.random.Generator) -> None:
    """Windowed uploads, every pair's masked product, the key holder's decryptions."""
    window = window_size(length)
    blobs: list[bytes] = []
    for _ in range(n):
        vec = np.zeros(window)
        vec[:length] = rng.standard_normal(length)
        blobs += _upload(fl, "similarity", ctx, [vec.tolist()])
    cts = _load(fl, "similarity", ctx, blobs)
    products = []
    for i in range(n):
        for j in range(i, n):
            with fl.op("similarity", "pair product (dot + mask)"):
                prod = cts[i].dot(cts[j]) * [1.0]
            with fl.op("similarity", "serialize"):
                products.append(prod.serialize())
    _decrypt(fl, "similarity", ctx, products)


def weights_floor(fl: Floor, ctx: ts.Context, n: int, length: int, slots: int, rng: np.random.Generator) -> None:
    """Full-slot uploads, one unrescaled weighted sum per receiver, each receiver's decryption."""
    uploads = [_upload(fl, "weights", ctx, _chunks(rng.standard_normal(length) * 0.1, slots)) for _ in range(n)]
    loaded = [_load(fl, "weights", ctx, up) for up in uploads]
    alpha = rng.dirichlet(np.ones(n), size=n)
    ctx.auto_rescale = False
    mixes: list[list[bytes]] = []
    for i in range(n):
        out = []
        for k in range(len(loaded[0])):
            with fl.op("weights", "scalar product"):
                acc = loaded[0][k] * float(alpha[i, 0])
            for j in range(1, n):
                with fl.op("weights", "scalar product"):
                    term = loaded[j][k] * float(alpha[i, j])
                with fl.op("weights", "add"):
                    acc.add_(term)
            with fl.op("weights", "serialize"):
                out.append(acc.serialize())
        mixes.append(out)
    ctx.auto_rescale = True
    for out in mixes:
        _decrypt(fl, "weights", ctx, out)


def sum_floor(fl: Floor, ctx: ts.Context, n: int, length: int, slots: int, rng: np.random.Generator) -> None:
    """An encrypted sum decrypted by the key holder (the metrics)."""
    blobs: list[bytes] = []
    for _ in range(n):
        blobs += _upload(fl, "metrics", ctx, _chunks(rng.standard_normal(length), slots))
    cts = _load(fl, "metrics", ctx, blobs)
    total = cts[0]
    for ct in cts[1:]:
        with fl.op("metrics", "add"):
            total.add_(ct)
    with fl.op("metrics", "serialize"):
        blob = total.serialize()
    _decrypt(fl, "metrics", ctx, [blob])


def fedpub_floor(*, clients: int, weights: int, embedding: int, metrics: int,
                 weights_preset: CKKSPreset, default_preset: CKKSPreset = PRESETS["default"],
                 seed: int = 0) -> Floor:
    """The raw-TenSEAL time of one FED-PUB round's CKKS work (see the module docstring)."""
    rng = np.random.default_rng(seed)
    fl = Floor()
    default = _context(default_preset, galois=True)
    similarity_floor(fl, default, clients, embedding, rng)
    weights_floor(fl, _context(weights_preset, galois=False), clients, weights, weights_preset.slots, rng)
    sum_floor(fl, _context(default_preset, galois=False), clients, metrics, default_preset.slots, rng)
    return fl


def describe(fl: Floor) -> list[str]:
    """One line per operation: count, seconds, milliseconds per operation."""
    return [f"  {flow:10s} {op:28s} {count:6d} x {1e3 * s / count:7.3f} ms = {s:6.3f} s"
            for flow, op, count, s in fl.rows()]


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--weights", type=int, default=184455, help="values per client model (FED-PUB on Cora: 184,455)")
    p.add_argument("--embedding", type=int, default=7)
    p.add_argument("--metrics", type=int, default=4)
    p.add_argument("--weights-params", default="8192:60,40,60:40", help="N:chain:scale_bits of fedpub/weights")
    a = p.parse_args(argv)
    n, chain, scale = a.weights_params.split(":")
    preset = resolve_preset({"poly_modulus_degree": int(n), "coeff_mod_bit_sizes": [int(b) for b in chain.split(",")],
                             "scale_bits": int(scale)})
    fl = fedpub_floor(clients=a.clients, weights=a.weights, embedding=a.embedding, metrics=a.metrics,
                      weights_preset=preset)
    print("\n".join(describe(fl)))
    print(f"ckks_floor_seconds={fl.total:.3f}")


if __name__ == "__main__":
    main()

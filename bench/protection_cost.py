"""The price of protection, per method: its default (protected) stack against ``plaintext``, in one run.

``python bench/protection_cost.py [--quick] [--methods fedavg fedsgd ...] [--rounds 4] [--data-root DIR]``

For each method, two in-process runs of the same configuration and seed are built, one under the
method's default stack (FED-PUB: ``fedpub_ckks``, see ``PROTECTED_STACK``) and one under
``protocols/plaintext.toml``, and driven round by round, interleaved (protected round r,
plaintext round r, ...), so machine load falls on both alike
(:class:`~securefg.federation.program.session.InProcessRun`). Round 0 is a warm-up (CKKS key
setup, first allocations) and is reported apart, as is the communicating setup phase
(FedStruct's Ā, FedSage+'s generators). ``round_ratio_<method>`` is the median protected round
time over the median plaintext one, ``bytes_ratio_<method>`` protected payload bytes over
plaintext ones for the whole run (setup included). CeFGC is one-shot: its single round is
compared whole, the pair run twice in opposite orders and averaged (``--quick`` shrinks its
generators so that the protocol, not diffusion training, is what is timed).

Node methods run on Cora (their usual partition, 10 clients), CeFGC on MUTAG (3 clients, its
paper setting). ``--quick`` uses 3 rounds and smaller models. When FedStruct is among the methods,
``fedstruct_bytes_growth`` is its bytes on Amazon Photo over its bytes on Cora, same settings
(``bench/fedstruct_bytes.py``; ``--no-growth`` skips it). The last lines are ``key=value``;
``max_round_ratio`` over the secure-sum stacks (every method but FED-PUB, whose stack is CKKS)
comes last.

Where the time goes: every step of the later rounds is timed per party
(:class:`~securefg.federation.program.step_clock.StepClock`), so each method also prints the
protected run's split by stage (``<tag> <stage or action>``: each client's seconds inside the
step, summed; the slowest client's; the server's own seconds after the step's replies) and the
deployment's critical path beside the in-process wall time (per step the slowest client plus the
server: what a run with every client on its own core would take, network aside).

For the CKKS stack (FED-PUB under ``fedpub_ckks``, not its default ``fedpub_dp``:
``PROTECTED_STACK``) the same process also times raw TenSEAL doing the round's CKKS
operations on vectors of the same sizes with the same parameters (``bench/ckks_floor.py``), right
after each later round, and prints ``ckks_floor_ratio_fedpub``: the protected round's extra
seconds over plaintext's, divided by that floor (so everything protection adds beyond the bare
CKKS operations counts against us: envelopes, wrappers, the shuffle).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: method -> (dataset, partition, clients, extra RunConfig fields, options)
SETTINGS: dict[str, tuple[str, str | None, int, dict[str, Any], dict[str, Any]]] = {
    "fedavg": ("Cora", "metis", 10, {}, {}),
    "fedsgd": ("Cora", "metis", 10, {}, {}),
    "fedstruct": ("Cora", "random", 10, {}, {"patience": 0}),
    "fedsage_plus": ("Cora", "louvain", 10, {}, {"gen_local_steps": 20, "gen_fed_steps": 2}),
    "fedsheafhn": ("Cora", "metis", 10, {}, {}),
    "fedpub": ("Cora", "metis", 10, {}, {}),
    "cefgc": ("MUTAG", None, 3, {}, {}),
}
QUICK_OPTIONS: dict[str, dict[str, Any]] = {
    "cefgc": {"diffusion_epochs": 1, "langevin_steps": 1, "tune_samples": 4, "gnn_epochs": 20, "max_nodes": 28},
    "fedstruct": {"structure_hops": 2},
}
CKKS_STACKS = {"fedpub"}
#: A protected stack other than the method's default: FED-PUB's default is fedpub_dp (CKKS mixes,
#: DP embeddings); the bench keeps timing fedpub_ckks, whose every tag but the model is CKKS, as
#: its CKKS floor (bench/ckks_floor.py) and docs/performance.md's figures assume.
PROTECTED_STACK: dict[str, str] = {"fedpub": "fedpub_ckks"}
#: One-round methods: their round cannot be interleaved with the other run's, so the pair is run
#: twice in opposite orders (protected first, then plaintext first) and the two times averaged.
ONE_SHOT = {"cefgc"}


def build(method: str, protocol: str | None, rounds: int, seed: int, data_root: str | None, quick: bool) -> Any:
    from securefg.device import seed_everything
    from securefg.experiment import RunConfig, build_method
    from securefg.federation.federation import Federation
    from securefg.federation.program.session import InProcessRun

    dataset, partition, clients, extra, options = SETTINGS[method]
    options = {**options, **(QUICK_OPTIONS.get(method, {}) if quick else {})}
    seed_everything(seed)
    cfg = RunConfig(method=method, dataset=dataset, partition=partition, clients=clients, rounds=rounds,
                    protocol=protocol, seed=seed, data_root=data_root, device="cpu", progress=False,
                    options=options, **extra)
    cfg, m, stack, _ = build_method(cfg)
    fed = Federation(m.num_clients, stack, seed=seed, extra_parties=m.extra_parties)
    return InProcessRun(m, fed, rounds=cfg.rounds), fed, cfg.rounds, stack.name


class KeptLayouts(dict):  # type: ignore[type-arg]
    """The server's layout table, remembering every entry after the exchange pops it."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: dict[tuple[str, int], dict[str, str]] = {}

    def setdefault(self, key: Any, default: Any = None) -> Any:
        entry = super().setdefault(key, default)
        self.kept[key] = entry
        return entry


def layout_sizes(run: Any, round: int) -> dict[str, int]:
    """Tag -> values each client contributed in ``round`` (from the layouts clients reported)."""
    from securefg.federation.flatten import layout_from_text

    out: dict[str, int] = {}
    for (tag, r), by_party in run.parties.server.layouts.kept.items():
        if r == round and by_party:
            out[tag] = layout_from_text(next(iter(by_party.values()))).size
    return out


def ckks_floor(method: str, runs: dict[str, Any], round: int) -> Any:
    """Raw TenSEAL doing ``method``'s CKKS work of one round (same sizes, same parameters)."""
    from ckks_floor import fedpub_floor

    from securefg.protocol.mechanism import ExchangeKind

    if method != "fedpub":
        raise ValueError(f"no CKKS floor for {method!r}")
    run, fed = runs["protected"][0], runs["protected"][1]
    sizes = {**layout_sizes(runs["plaintext"][0], round), **layout_sizes(run, round)}
    preset = fed.stack.resolve("fedpub/weights", ExchangeKind.PERSONALIZED_AGGREGATE).mechanism.keys.preset
    return fedpub_floor(clients=len(run.clients), weights=sizes["fedpub/weights"], embedding=sizes["fedpub/embedding"],
                        metrics=sizes["fedpub/metrics"], weights_preset=preset, seed=round)


def measure_one_shot(method: str, rounds: int, seed: int, data_root: str | None, quick: bool) -> dict[str, Any]:
    """A one-round method: two fresh pairs in opposite orders (so a drift in machine load falls on
    both alike); per run its two round times and critical paths, the first pair's clocks, bytes
    and scores (both pairs are the same seeded computation)."""
    from securefg.federation.program.step_clock import StepClock

    out: dict[str, Any] = {}
    for order in (("protected", "plaintext"), ("plaintext", "protected")):
        runs = {name: build(method, PROTECTED_STACK.get(method) if name == "protected" else "plaintext", rounds, seed,
                            data_root, quick)
                for name in order}
        for name, (run, fed, _, stack) in runs.items():
            entry = out.setdefault(name, {"rounds": [], "critical": [], "stack": stack, "setup": 0.0})
            t0 = time.perf_counter()
            run.prepare()
            entry["setup"] += (time.perf_counter() - t0) / 2
            clock = run.parties.server.clock = StepClock()
            clock.start()
            t0 = time.perf_counter()
            run.play_round(0)
            entry["rounds"].append(time.perf_counter() - t0)
            clock.stop()
            entry["critical"].append(clock.critical_path)
            entry.setdefault("clock", clock)
            entry.setdefault("bytes", fed.transcript.summary()["bytes_total"])
            entry.setdefault("test", run.row(0).get("mean_test"))
    out["floors"], out["later_rounds"], out["one_shot"] = [], 1, True
    return out


def measure(method: str, rounds: int, seed: int, data_root: str | None, quick: bool) -> dict[str, Any]:
    """Both runs of ``method``, interleaved; per-round seconds, setup seconds, bytes, the
    later rounds' per-stage clocks and (CKKS stacks) the raw-TenSEAL floor after each later round."""
    from securefg.federation.program.step_clock import StepClock

    if method in ONE_SHOT:
        return measure_one_shot(method, rounds, seed, data_root, quick)
    runs = {name: build(method, proto, rounds, seed, data_root, quick) for name, proto in
            (("protected", PROTECTED_STACK.get(method)), ("plaintext", "plaintext"))}
    out: dict[str, Any] = {name: {"rounds": [], "setup": 0.0, "stack": r[3], "critical": []} for name, r in runs.items()}
    for name, (run, _, _, _) in runs.items():
        t0 = time.perf_counter()
        run.prepare()
        out[name]["setup"] = time.perf_counter() - t0
        out[name]["clock"] = run.parties.server.clock = StepClock()
        run.parties.server.layouts = KeptLayouts()
    n = min(r[2] for r in runs.values())
    floors = []
    for r in range(n):
        for name, (run, _, _, _) in runs.items():
            clock = out[name]["clock"]
            if r == 1:
                clock.reset()  # round 0 (key setup, first allocations) is reported apart
            before = clock.critical_path
            clock.start()
            t0 = time.perf_counter()
            run.play_round(r)
            out[name]["rounds"].append(time.perf_counter() - t0)
            clock.stop()
            out[name]["critical"].append(clock.critical_path - (0.0 if r == 1 else before))
        if r >= 1 and method in CKKS_STACKS:
            floors.append(ckks_floor(method, runs, r))
    for name, (run, fed, _, _) in runs.items():
        out[name]["bytes"] = fed.transcript.summary()["bytes_total"]
        out[name]["test"] = run.row(n - 1).get("mean_test")
    out["floors"] = floors
    out["later_rounds"] = max(n - 1, 1)
    return out


def fedstruct_growth(data_root: str | None, *, quick: bool) -> float:
    """FedStruct's bytes on Photo over Cora, same settings (``bench/fedstruct_bytes.py``: its usual
    random partition, 10 clients, the setup phase plus 100 rounds; ``--quick``: 2 structure hops)."""
    from fedstruct_bytes import QUICK_HOPS, measure_bytes

    hops = QUICK_HOPS if quick else None
    runs = {d: measure_bytes(d, stack="fedstruct_secure", hops=hops, data_root=data_root) for d in ("Cora", "Photo")}
    for d, r in runs.items():
        print(f"fedstruct bytes on {d}: {r['nodes']:,} nodes, {r['edges']:,} edges, {r['boundary_nodes']:,} boundary "
              f"nodes, {r['hops']} hops | A-bar {r['abar_bytes']:,} B, setup {r['setup_bytes']:,} B, per round "
              f"{r['per_round_bytes']:,.0f} B, total (100 rounds) {r['total_bytes']:,.0f} B", flush=True)
    return float(runs["Photo"]["total_bytes"] / runs["Cora"]["total_bytes"])


def stage_table(clock: Any, rounds: int) -> list[str]:
    """The protected run's seconds per round by stage: clients summed, slowest client, server."""
    rows = sorted(clock.stages.items(), key=lambda kv: -(kv[1].clients_total + kv[1].server))
    lines = [f"    {'stage':44s} {'steps':>5s} {'clients':>8s} {'slowest':>8s} {'server':>8s}  (s per round)"]
    for name, st in rows:
        lines.append(f"    {name[:44]:44s} {st.steps / rounds:5.1f} {st.clients_total / rounds:8.3f} "
                     f"{st.clients_slowest / rounds:8.3f} {st.server / rounds:8.3f}")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument("--rounds", type=int, default=0, help="rounds per run (default: 4, or 3 with --quick)")
    p.add_argument("--quick", action="store_true", help="fewer rounds, smaller generators (minutes, not an hour)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root", default=os.environ.get("SECUREFG_DATA"))
    p.add_argument("--no-growth", action="store_true",
                   help="skip fedstruct_bytes_growth (FedStruct on Cora and Photo: minutes and ~7.5 GB)")
    a = p.parse_args()
    rounds = a.rounds or (3 if a.quick else 4)
    figures: dict[str, float] = {}
    for method in a.methods:
        res = measure(method, rounds, a.seed, a.data_root, a.quick)
        prot, plain = res["protected"], res["plaintext"]
        # CeFGC is one-shot (one round): compare it whole; the others after their warm-up round
        later = slice(None) if res.get("one_shot") else slice(1, None)
        rp, rq = statistics.median(prot["rounds"][later]), statistics.median(plain["rounds"][later])
        cp, cq = statistics.median(prot["critical"][later]), statistics.median(plain["critical"][later])
        figures[f"round_ratio_{method}"] = rp / rq
        figures[f"bytes_ratio_{method}"] = prot["bytes"] / max(plain["bytes"], 1)
        figures[f"critical_path_ratio_{method}"] = cp / cq
        print(f"{method}: {prot['stack']} vs plaintext | round 0 {prot['rounds'][0]:.2f} / {plain['rounds'][0]:.2f} s | "
              f"later rounds median {rp:.3f} / {rq:.3f} s in process, critical path {cp:.3f} / {cq:.3f} s | "
              f"setup phase {prot['setup']:.2f} / {plain['setup']:.2f} s | "
              f"bytes {prot['bytes']:,} / {plain['bytes']:,} | mean test {prot['test']} / {plain['test']}", flush=True)
        print("\n".join(stage_table(prot["clock"], res["later_rounds"])), flush=True)
        if res["floors"]:
            from ckks_floor import describe

            floor = statistics.median(f.total for f in res["floors"])
            figures[f"ckks_floor_ratio_{method}"] = (rp - rq) / floor
            print(f"  raw-TenSEAL floor of the round's CKKS work: median {floor:.3f} s "
                  f"(protected - plaintext = {rp - rq:.3f} s); operations of the last floor run:", flush=True)
            print("\n".join(describe(res["floors"][-1])), flush=True)
    if "fedstruct" in a.methods and not a.no_growth:
        figures["fedstruct_bytes_growth"] = fedstruct_growth(a.data_root, quick=a.quick)
    secure = [figures[f"round_ratio_{m}"] for m in a.methods if m not in CKKS_STACKS]
    for key, value in figures.items():
        print(f"{key}={value:.2f}")
    if secure:
        print(f"max_round_ratio={max(secure):.2f}")


if __name__ == "__main__":
    main()

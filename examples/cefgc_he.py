"""CeFGC+ under CKKS next to plaintext CeFGC and FedAvg, on one split: the headline example.

With no arguments: MUTAG, single-dataset setting, 3 clients, seed 0. It runs

1. **CeFGC+ (HE)**: ``protocols/cefgc_plus.toml`` -- models relayed and pair-averaged under CKKS,
   cosine pairing decrypted by a key holder as a permuted multiset, GIN weights summed under CKKS;
2. **CeFGC+ (plaintext)**: the same seed under ``protocols/plaintext.toml`` -- the twin whose AUC the
   HE run must match (the only difference is CKKS error);
3. **FedAvg (plaintext)**: the multi-round baseline on the same split (100 rounds);
4. with ``--with-basic``, **CeFGC (plaintext)**: the basic method, no pair averaging;

and prints one table (AUC, rounds, server-client flights, bytes per party and per round, wall time
split into diffusion training, sampling, HE/protocol and GNN training). How to read it: the README,
"What the headline example shows". Phase 1 (diffusion training) is
offline and reusable (the paper excludes it from online time): every client trains its generators
once into its own cache folder (the clients in parallel processes: the machine has 2 cores), then
the HE run, its plaintext twin and FedAvg run in parallel and load them; ``--sequential`` does one
thing at a time. Output: ``<out>/table.md``, ``<out>/results.json``, ``<out>/auc.png`` and each
run's ``result.json``.

If the data root has no MUTAG (and there is no internet), the example says so and runs on the
built-in synthetic graph set instead, labelled as such.

Usage::

    python examples/cefgc_he.py [--dataset MUTAG] [--setting single] [--clients 3]
        [--variant cefgc_plus|cefgc_star_plus] [--seed 0] [--device auto] [--out runs/cefgc_he]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SYNTHETIC = "synthetic-graphs"


def say(line: str) -> None:
    """Print one progress line in a single write, so parallel runs' lines never interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def data_root(arg: str | None) -> str | None:
    """``--data-root`` > ``$SECUREFG_DATA`` > ``../shared/datasets`` next to the repo (if present)."""
    if arg:
        return arg
    if os.environ.get("SECUREFG_DATA"):
        return os.environ["SECUREFG_DATA"]
    shared = REPO.parent / "shared" / "datasets"
    return str(shared) if shared.is_dir() else None


def pick_dataset(name: str, root: str | None) -> tuple[str, str]:
    """The dataset to run and a label; falls back to the synthetic set when the data is missing.

    Only missing files (or no internet to fetch them) fall back: an unknown name or unreadable
    files raise, since a stand-in would hide the mistake.
    """
    if name.lower() in (SYNTHETIC, "synthetic"):
        return SYNTHETIC, "synthetic graph set (securefg.data.synthetic)"
    from securefg.data.graph_datasets import load_graph_dataset

    try:
        for part in name.split("+"):
            load_graph_dataset(part, root)
    except OSError as exc:  # DatasetNotFoundError, or a failed download: say so, fall back
        print(f"!! {name} is not available under data root {root!r} ({type(exc).__name__}: {exc}).\n"
              f"!! Running on the SYNTHETIC graph set instead; numbers below are NOT {name} results.")
        return SYNTHETIC, f"SYNTHETIC stand-in (no {name} under {root})"
    return name, f"{name} from {root}"


def run(label: str, method: str, stack: str, args: argparse.Namespace, dataset: str, root: str | None,
        options: dict[str, Any], rounds: int = 1) -> dict[str, Any]:
    import torch

    from securefg.experiment import RunConfig, run_experiment

    torch.set_num_threads(max(args.threads, 1))

    out = Path(args.out) / label.replace(" ", "_").replace("(", "").replace(")", "").replace("+", "plus")
    cfg = RunConfig(method=method, dataset=dataset, partition=args.setting, clients=args.clients, rounds=rounds,
                    protocol=stack, seed=args.seed, data_root=root, device=args.device, out=str(out),
                    options=options, progress=False)
    say(f"-- {label}: {method} with stack {stack} ...")
    t0 = time.perf_counter()
    res = run_experiment(cfg)
    fed = res.pop("_federation", None)
    if fed is not None and method.endswith("_plus"):
        res["leak"] = partner_leak(fed)
    res["label"] = label
    say(f"   {label} done in {time.perf_counter() - t0:.1f} s: AUC {res['metrics'].get('test_auc'):.4f}")
    return res


def phase1_clients(args: argparse.Namespace, dataset: str, root: str | None) -> int:
    """How many clients the split has (``--clients`` per dataset in multi-dataset settings)."""
    from securefg.experiment import RunConfig
    from securefg.experiment_data import build_task

    cfg = RunConfig(method=args.variant, dataset=dataset, partition=args.setting, clients=args.clients,
                    seed=args.seed, data_root=root)
    task, _ = build_task(cfg)
    return len(task.train)


def phase1(args: argparse.Namespace, dataset: str, root: str | None, options: dict[str, Any], k: int) -> None:
    """Client ``k``'s offline phase 1, as the method runs it, into the client's generator cache."""
    import torch

    from securefg.device import resolve_device, seed_everything
    from securefg.experiment import RunConfig
    from securefg.experiment_data import build_task
    from securefg.federation.party import Party, client_id
    from securefg.methods.base import MethodConfig, method_class

    torch.set_num_threads(max(args.threads, 1))
    cfg = RunConfig(method=args.variant, dataset=dataset, partition=args.setting, clients=args.clients,
                    seed=args.seed, data_root=root, options=options)
    seed_everything(args.seed)
    task, _ = build_task(cfg)
    method = method_class(args.variant)(task, MethodConfig(rounds=1, device=resolve_device(args.device),
                                                           seed=args.seed, options=dict(options)))
    party = Party(client_id(k))
    party.state.update(index=k, data={"train": task.train[k], "val": task.val[k], "test": task.test[k]})
    method.handle_phase1(party)  # type: ignore[attr-defined]


def partner_leak(fed: Any) -> dict[str, Any]:
    """CeFGC+'s leak, measured: each client's best ``(g * mix - own) / (g - 1)`` reconstruction
    of a peer, over pair (g = 2) and whole-group guesses. Exact (CKKS noise, ~1e-6) with the
    paper's pairs (``mix_peers=1``); not with the default groups of >= 3 (``mix_peers=2``)."""
    from securefg.methods.cefgc import partner_recovery

    out = {}
    for c in fed.client_ids:
        st = fed.parties[c].state
        truths = {o: fed.parties[o].state["own_package"] for o in fed.client_ids if o != c}
        r = partner_recovery(st["own_package"], st["received_packages"], truths,
                             group_sizes=sorted({2, len(fed.client_ids)}))
        out[c] = {"recovered": r["recovered"], "relative_error": r["best_relative_error"]}
    return out


def row(res: dict[str, Any]) -> dict[str, Any]:
    """One table row from a result.json object."""
    parties = res["bytes_by_party"]
    clients = [v for k, v in parties.items() if k.startswith("client/")]
    t = res.get("timing", {})
    p1 = [c["phase1"] for c in res.get("cefgc", {}).get("clients", {}).values()]
    cached = bool(p1) and all(x.get("cached") for x in p1)
    diffusion = sum(x.get("train_seconds", 0.0) + x.get("tune_seconds", 0.0) for x in p1)
    pr = res.get("paper_rounds", {})
    if pr:
        per_round = f"R1 {pr['R1_bytes'] / 1e6:.2f} / R2 {pr['R2_bytes'] / 1e6:.2f} / R3 {pr['R3_bytes'] / 1e6:.2f}"
    else:
        per_round = f"{res['bytes_total'] / max(res['communication_rounds'], 1) / 1e6:.3f} per flight"
    helper = {k: v for k, v in parties.items() if not k.startswith("client/") and k != "server"}
    return {
        "run": res["label"],
        "stack": res["protocol"],
        "auc": res["metrics"].get("test_auc"),
        "rounds": pr.get("paper_rounds", res["rounds"]),  # CeFGC's 3 paper rounds; FedAvg's --fedavg-rounds
        "flights": res["communication_rounds"],  # server-client message sweeps in the transcript
        "MB_total": res["bytes_total"] / 1e6,
        "MB_server_sent/recv": f"{parties.get('server', {}).get('sent', 0) / 1e6:.2f}/{parties.get('server', {}).get('received', 0) / 1e6:.2f}",
        "MB_client_sent/recv": (f"{sum(c['sent'] for c in clients) / len(clients) / 1e6:.2f}/"
                                f"{sum(c['received'] for c in clients) / len(clients) / 1e6:.2f}") if clients else "-",
        "MB_helper": ", ".join(f"{k} {(v['sent'] + v['received']) / 1e6:.1f}" for k, v in helper.items()) or "-",
        "MB_per_round": per_round,
        "s_diffusion": (f"{diffusion:.1f} (cached)" if cached else f"{diffusion:.1f}") if p1 else "-",
        "s_sampling": f"{t.get('sampling_seconds', 0.0):.1f}" if t else "-",
        "s_HE/protocol": f"{t.get('protocol_seconds', 0.0):.1f}" if t else "-",
        "s_GNN": f"{t.get('gnn_training_seconds', 0.0):.1f}" if t else f"{res['train_seconds']:.1f}",
        "s_wall": f"{res['wall_seconds']:.1f}",
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    fmt = lambda v: f"{v:.4f}" if isinstance(v, float) and v < 10 and not isinstance(v, bool) else (f"{v:.2f}" if isinstance(v, float) else str(v))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    names = [r["run"] for r in rows]
    a.bar(names, [r["auc"] for r in rows], color=["#3b6ea8", "#7aa6d6", "#9bbf85", "#c98b6b"][: len(rows)])
    a.set_ylim(0.5, 1.0)
    a.set_ylabel("global test ROC-AUC")
    for i, r in enumerate(rows):
        a.text(i, r["auc"] + 0.005, f"{r['auc']:.3f}", ha="center", fontsize=8)
    b.bar(names, [r["MB_total"] for r in rows], color="#888888")
    b.set_yscale("log")
    b.set_ylabel("MB exchanged (log)")
    for i, r in enumerate(rows):
        b.text(i, r["MB_total"], f"{r['rounds']} rounds, {r['flights']} flights", ha="center", va="bottom", fontsize=8)
    for ax in (a, b):
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def positive(text: str) -> int:
    """argparse type: an integer >= 1 (checked before any run starts, so no work is lost)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="MUTAG")
    p.add_argument("--setting", default="single", help="single, across_dataset, across_domain (graph partitions)")
    p.add_argument("--clients", type=positive, default=3, help="clients (per dataset in the multi-dataset settings)")
    p.add_argument("--variant", default="cefgc_plus", choices=["cefgc_plus", "cefgc_star_plus"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--data-root", default=None)
    p.add_argument("--out", default="runs/cefgc_he")
    p.add_argument("--fedavg-rounds", type=positive, default=100)
    p.add_argument("--diffusion-epochs", type=positive, default=100)
    p.add_argument("--sequential", action="store_true",
                   help="one run after another, phase-1 generators cached and reused (default: parallel processes)")
    p.add_argument("--with-basic", action="store_true",
                   help="also run basic CeFGC (no pair averaging) under plaintext (about +2 min)")
    p.add_argument("--threads", type=positive, default=int(os.environ.get("SECUREFG_THREADS", "1")),
                   help="torch threads (1 is fastest for these tiny tensors on a busy 2-core machine)")
    args = p.parse_args(argv)
    from securefg.errors import SecureFGError

    try:
        return headline(args)
    except SecureFGError as exc:  # bad flags or data: one clear line, no traceback
        print(f"cefgc_he: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def headline(args: argparse.Namespace) -> int:
    """Phase 1, the runs, then the table, JSON and plot; 0 when HE and plaintext agree within 0.01."""
    import torch

    from securefg.device import resolve_device
    from securefg.errors import ConfigError

    torch.set_num_threads(args.threads)
    resolve_device(args.device)  # an unusable --device fails here, before any training
    os.environ.setdefault("SECUREFG_OFFLINE", "1")
    start = time.perf_counter()
    root = data_root(args.data_root)
    dataset, label = pick_dataset(args.dataset, root)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"CeFGC on {label}; setting {args.setting}, {args.clients} clients, seed {args.seed}")
    # Phase 1 (diffusion training) is offline and reusable: each client trains its generators
    # once into its own cache folder, and every CeFGC run below loads them ("cached" in the table).
    # By default the clients' phase 1 runs in parallel processes, then the HE run, its plaintext
    # twin and FedAvg run in parallel (the machine has 2 cores); --sequential does one at a time.
    options: dict[str, Any] = {"diffusion_epochs": args.diffusion_epochs, "generator_cache": str(out / "generators")}
    plus = "CeFGC*+" if args.variant == "cefgc_star_plus" else "CeFGC+"
    basic = "cefgc_star" if args.variant == "cefgc_star_plus" else "cefgc"
    jobs: list[tuple[Any, ...]] = [
        (f"{plus} (HE)", args.variant, "cefgc_plus", args, dataset, root, options, 1),
        (f"{plus} (plaintext)", args.variant, "plaintext", args, dataset, root, options, 1),
    ]
    if args.with_basic:
        jobs.append((f"{plus.rstrip('+')} (plaintext)", basic, "plaintext", args, dataset, root, options, 1))
    jobs.append(("FedAvg (plaintext)", "fedavg", "plaintext", args, dataset, root, {}, args.fedavg_rounds))
    t0 = time.perf_counter()
    n_clients = phase1_clients(args, dataset, root)
    if n_clients < 2:
        raise ConfigError(f"CeFGC needs at least 2 clients (each receives the others' models); the split has {n_clients}")
    print(f"-- phase 1 (offline): training {n_clients} clients' generators ...", flush=True)
    if args.sequential:
        for k in range(n_clients):
            phase1(args, dataset, root, options, k)
        print(f"   done in {time.perf_counter() - t0:.1f} s", flush=True)
        results = [run(*job) for job in jobs]
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ctx = mp.get_context("spawn")
        with ProcessPoolExecutor(max_workers=max(n_clients, len(jobs)), mp_context=ctx) as pool:
            list(pool.map(phase1, *zip(*[(args, dataset, root, options, k) for k in range(n_clients)], strict=True)))
            print(f"   done in {time.perf_counter() - t0:.1f} s", flush=True)
            results = list(pool.map(run, *zip(*jobs, strict=True)))
    rows = [row(r) for r in results]
    diff = abs(rows[0]["auc"] - rows[1]["auc"])
    table = markdown(rows)
    total = time.perf_counter() - start
    summary = (f"\nData: {label}. HE vs plaintext twin: |AUC difference| = {diff:.4f} "
               f"({'within' if diff <= 0.01 else 'OUTSIDE'} 0.01). Total wall time {total:.0f} s.\n"
               "rounds = the method's rounds (CeFGC: the paper's 3; FedAvg: --fedavg-rounds); flights = server-client "
               "message sweeps in the transcript (a FedAvg round is 2: the broadcast and the upload). MB_helper = key holder "
               "traffic (keys, decryptions), not server-client. s_diffusion = phase 1 (offline) incl. the sender's "
               "sampler tuning; 'cached' = trained once per client (offline) and reused by every CeFGC run. FedAvg: s_GNN = all rounds. "
               f"Runs {'one after another' if args.sequential else 'in parallel processes'}; s_* are per run.")
    leak = results[0].get("leak", {})
    if leak:
        summary += "\nCeFGC+ partner recovery ((g * mix - own) / (g - 1), from each client's own view, HE run; " \
                   "exact recovery would show CKKS noise, ~1e-6): " + "; ".join(
            f"{c} -> {v['recovered']} rel. error {v['relative_error']:.1e}" for c, v in leak.items())
    print("\n" + table + summary)
    (out / "table.md").write_text(table + "\n" + summary + "\n", encoding="utf-8")
    (out / "results.json").write_text(json.dumps({"data": label, "rows": rows, "he_vs_plaintext_auc_diff": diff,
                                                  "wall_seconds": total, "runs": results}, indent=2, default=str))
    plot(rows, out / "auc.png", f"CeFGC on {label} ({args.clients} clients, seed {args.seed})")
    print(f"wrote {out / 'table.md'}, {out / 'results.json'}, {out / 'auc.png'}")
    return 0 if diff <= 0.01 else 1


if __name__ == "__main__":
    raise SystemExit(main())

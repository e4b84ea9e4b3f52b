"""``securefg run``: one experiment, written as ``<out>/result.json``."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from securefg.errors import ConfigError


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``run`` and ``audit``."""
    p.add_argument("--method", required=True, help="fedavg, fedprox, local, centralized, cefgc, fedstruct, ...")
    p.add_argument("--dataset", required=True, help="e.g. Cora, CiteSeer, Photo, MUTAG, PROTEINS, or synthetic names")
    p.add_argument("--partition", default=None, help="metis, metis_overlap, louvain, random, kmeans; graph: single, across_dataset, across_domain, dirichlet")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--protocol", default=None, help="stack name in protocols/ or a TOML path (default: the method's protected stack)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=None,
                   help="seed of the data split and partition (default: --seed); FED-PUB fixes 1234")
    p.add_argument("--data-root", default=None, help="dataset root (default: $SECUREFG_DATA, else the user cache)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--weight-decay", type=float, default=None)
    p.add_argument("--local-epochs", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=0)
    p.add_argument("--prox-mu", type=float, default=0.0)
    p.add_argument("--split", default=None, help="train/val/test ratios, e.g. 0.2,0.4,0.4")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="method option (repeatable)")
    p.add_argument("--nsf", default=None, help="FedStruct node structure features: hop2vec, node2vec, degree")
    p.add_argument("--variant", default=None, help="method variant (FedStruct A|B; CeFGC basic|star)")


def config_from_args(args: argparse.Namespace) -> Any:
    from securefg.experiment import RunConfig

    options = parse_options(args.option)
    if args.nsf is not None:
        options["nsf"] = args.nsf
    if args.variant is not None:
        options["variant"] = args.variant
    split = parse_split(args.split)
    return RunConfig(
        method=args.method, dataset=args.dataset, partition=args.partition, clients=args.clients,
        rounds=args.rounds, protocol=args.protocol, seed=args.seed,
        data_seed=getattr(args, "data_seed", None), data_root=args.data_root,
        device=args.device, out=getattr(args, "out", None), lr=args.lr, weight_decay=args.weight_decay,
        local_epochs=args.local_epochs, batch_size=args.batch_size, hidden=args.hidden,
        prox_mu=args.prox_mu, split=split, options=options,
        checkpoint_every=getattr(args, "checkpoint_every", 0), resume=getattr(args, "resume", False),
        progress=not getattr(args, "no_progress", False),
    )


def parse_options(items: list[str]) -> dict[str, Any]:
    """``--option KEY=VALUE`` strings as a dict (numbers and true/false parsed).

    Raises:
        ConfigError: An item without ``=``.
    """
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--option expects KEY=VALUE, got {item!r}")
        options[key] = _parse_value(value)
    return options


def _parse_value(v: str) -> Any:
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="run one method on one dataset and write result.json")
    add_run_options(p)
    p.add_argument("--out", required=True, help="output folder (result.json, curve.png, checkpoints)")
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--backend", choices=("inprocess", "flower"), default="inprocess",
                   help="inprocess (default): every party in this process; flower: one OS process per "
                        "party over Flower's gRPC transport (pip install \"securefg[flower]\")")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from securefg.commands.out_dir import check_out_dir
    from securefg.experiment import run_experiment

    check_out_dir(args.out)  # before the run, not after it: --out "" or a file fails here
    cfg = config_from_args(args)
    if getattr(args, "backend", "inprocess") == "flower":
        from securefg.integrations.flower.launcher import run_flower_experiment

        result = run_flower_experiment(cfg)
    else:
        result = run_experiment(cfg)
    clean = {k: v for k, v in result.items() if not k.startswith("_")}
    if args.format == "json":
        json.dump(clean, sys.stdout, indent=2, default=str)
        print()
    else:
        print(render_result(clean))
    return 0


def render_result(r: dict[str, Any]) -> str:
    """Human view of a result (a rendering of the same object as result.json)."""
    m = r.get("metrics", {})
    score = ", ".join(f"{k}={v:.4f}" for k, v in m.items() if isinstance(v, float))
    lines = [
        f"{r['method']} on {r['dataset']} ({r['partition']}, {r['clients']} clients, {r['rounds']} rounds, seed {r['seed']})",
        f"  protocol stack : {r['protocol']}",
        f"  metrics        : {score}",
        f"  bytes          : {r['bytes_total']:,} payload / {r['wire_bytes_total']:,} on the wire, {r['communication_rounds']} server-client rounds",
        f"  wall time      : {r['wall_seconds']:.1f} s",
    ]
    stop = r.get("stopped_early")
    if stop:
        lines.insert(1, f"  stopped early  : after round {stop['round']} ({stop['rounds_run']} of {r['rounds']} rounds run; "
                        f"{stop['patience']} rounds without a better {stop['monitor']}; --option patience=0 runs all)")
    p = r.get("privacy") or {}
    if p.get("epsilon") is not None:
        lines.append(f"  privacy        : epsilon={p['epsilon']:.3g} at delta={p.get('delta')} ({p.get('accountant')}; per client in result.json)")
    return "\n".join(lines)


def parse_split(text: str | None) -> tuple[float, float, float] | None:
    """``--split 0.2,0.4,0.4`` as train/val/test ratios (``None`` when not given).

    Raises:
        ConfigError: Not three non-negative numbers summing to 1.
    """
    if not text:
        return None
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError as exc:
        raise ConfigError(f"--split expects three numbers like 0.2,0.4,0.4, got {text!r}") from exc
    if len(parts) != 3 or not all(math.isfinite(x) and x >= 0 for x in parts) or abs(sum(parts) - 1) > 1e-6:
        raise ConfigError(f"--split needs three non-negative ratios summing to 1, got {text!r}")
    return parts[0], parts[1], parts[2]

"""``securefg run``: one experiment, written as ``<out>/result.json``."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from securefg.errors import ConfigError


class _ListOptions(argparse.Action):
    """``--list-options METHOD``: print every ``--option`` key of METHOD with its default, then exit
    (like ``--help``, before the required flags are checked)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from securefg.commands.option_list import render_options
        from securefg.methods.method_card import method_card

        try:
            method_card(str(values))
        except ConfigError as exc:
            parser.error(str(exc))
        print(render_options(str(values)))
        parser.exit(0)


def _methods_epilog() -> str:
    from securefg.methods.method_card import METHOD_CARDS

    width = max(map(len, METHOD_CARDS))
    stack_width = max(len(c.default_stack) for c in METHOD_CARDS.values())
    lines = ["methods (--method; paper, task and default stack in the README's table):"]
    lines += [f"  {c.name:<{width}}  {'/'.join(c.tasks):<10} {c.default_stack:<{stack_width}} {c.summary}"
              for c in METHOD_CARDS.values()]
    lines += ["", ("The data root: --data-root DIR, else $SECUREFG_DATA, else ~/.cache/securefg/datasets "
              "(securefg datasets lists what is there)."),
              "securefg run --list-options METHOD lists the --option keys of METHOD with their defaults."]
    return "\n".join(lines)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``run``, ``audit`` and ``config``."""
    from securefg.methods.method_card import METHOD_CARDS
    from securefg.run_config import GRAPH_PARTITIONS, NODE_PARTITIONS

    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = _methods_epilog()
    p.add_argument("--method", required=True, metavar="METHOD",
                   help=f"the method: {', '.join(METHOD_CARDS)} (list below)")
    p.add_argument("--dataset", required=True,
                   help="Cora, CiteSeer, PubMed, Computers, Photo, ... (node); MUTAG, PROTEINS, ENZYMES, IMDB-BINARY, "
                        "... (graph); several graph sets as A+B or the presets Protein, Social, Mix; no files: csbm "
                        "(node), synthetic-graphs (graph). `securefg datasets` lists them")
    p.add_argument("--partition", default=None,
                   help=f"how the data is split over the clients; node: {', '.join(NODE_PARTITIONS)} (default metis); "
                        f"graph: {', '.join(GRAPH_PARTITIONS)} (default single)")
    p.add_argument("--clients", type=int, default=10,
                   help="number of clients (per dataset with several graph datasets) (default: 10)")
    p.add_argument("--rounds", type=int, default=100,
                   help="communication rounds; one-shot methods (CeFGC) always run 1 (default: 100)")
    p.add_argument("--protocol", default=None, metavar="STACK",
                   help="protection stack: a name in protocols/ (plaintext, fedavg_secure_sum, fedavg_ckks, fedavg_dp, "
                        "...) or a TOML path (default: the method's protected stack)")
    p.add_argument("--seed", type=int, default=0, help="run seed: initialisation, sampling, masks (default: 0)")
    p.add_argument("--data-seed", type=int, default=None,
                   help="seed of the data split and partition (default: --seed); FED-PUB fixes 1234")
    p.add_argument("--data-root", default=None, metavar="DIR",
                   help="folder holding the datasets in PyG's raw layout (default: $SECUREFG_DATA, else "
                        "~/.cache/securefg/datasets)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default: the method's; node tasks 0.01, graph tasks 0.001)")
    p.add_argument("--weight-decay", type=float, default=None,
                   help="weight decay (default: the method's; node tasks 1e-6, graph tasks 5e-4)")
    p.add_argument("--local-epochs", type=int, default=None,
                   help="local epochs per round (default: the method's; mostly 1)")
    p.add_argument("--batch-size", type=int, default=32, help="graphs per mini-batch, graph tasks (default: 32)")
    p.add_argument("--hidden", type=int, default=0,
                   help="hidden width of the model (default: 0 = the method's: GCN 128, GIN 32)")
    p.add_argument("--prox-mu", type=float, default=0.0,
                   help="FedProx's proximal coefficient (default: 0; --method fedprox uses 0.01 when 0)")
    p.add_argument("--split", default=None,
                   help="train,val,test ratios of the nodes, e.g. 0.2,0.4,0.4 (default: the partition's paper split)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a method option, repeatable; --list-options METHOD lists them with their defaults")
    p.add_argument("--list-options", action=_ListOptions, metavar="METHOD",
                   help="print every --option key of METHOD with its default and meaning, and exit")
    p.add_argument("--no-preset", action="store_true",
                   help="ignore the method's per-dataset preset (securefg/presets/<method>.toml): unset values take "
                        "the method's built-in defaults (default: the preset fills what no flag sets)")
    p.add_argument("--nsf", default=None,
                   help="FedStruct's node structure features: hop2vec (default), node2vec or degree")
    p.add_argument("--variant", default=None,
                   help="FedStruct: A (the server holds the graph) or B (nobody does; default). CeFGC: basic or star, "
                        "the same as --method cefgc or cefgc_star (the + variants are --method cefgc_plus, "
                        "cefgc_star_plus)")


def config_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~securefg.run_config.RunConfig` of parsed ``run``/``audit``/``config`` arguments."""
    from securefg.run_config import RunConfig

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
        progress=not getattr(args, "no_progress", False), preset=not getattr(args, "no_preset", False),
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
    p = sub.add_parser("run", help="run one method on one dataset and write result.json",
                       description="Run one method on one dataset under a protection stack; write <out>/result.json "
                                   "and <out>/curve.png, and print what each number scores.")
    add_run_options(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder: result.json, curve.png (created)")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="write <out>/checkpoint.pt every N rounds and at the end, so --resume can continue an "
                        "interrupted run (default: 0 = no checkpoint)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (a terminal) or progress lines every 30 s (a log)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: a summary naming what each number scores; json: the result.json object (default: text)")
    p.add_argument("--backend", choices=("inprocess", "flower"), default="inprocess",
                   help="inprocess (default): every party in this process; flower: one OS process per "
                        "party over Flower's gRPC transport (pip install \"securefg[flower]\")")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from securefg.commands.out_dir import check_out_dir
    from securefg.commands.preflight import check_run

    check_out_dir(args.out)  # before the run, not after it: --out "" or a file fails here
    cfg = config_from_args(args)
    check_run(cfg)  # names, kinds and files, before torch is imported
    from securefg.experiment import run_experiment

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
    """Human view of a result (a rendering of the same object as result.json): every metric with
    the model it scores."""
    from securefg.metrics_doc import label
    from securefg.run_config import dataset_kind

    m = r.get("metrics", {})
    kind = dataset_kind(str(r["dataset"]))
    scores = [(k, v) for k, v in m.items() if isinstance(v, int | float) and not isinstance(v, bool)]
    width = max((len(k) for k, _ in scores), default=0)
    lines = [
        f"{r['method']} on {r['dataset']} ({r['partition']}, {r['clients']} clients, {r['rounds']} rounds, seed {r['seed']})",
        f"  protocol stack : {r['protocol']}",
        "  metrics        : what each number scores (full definitions: result.json \"metrics_doc\", docs/metrics.md)",
        *(f"    {k:<{width}}  {_number(v):>7}  {label(k, str(r['method']), kind)}" for k, v in scores),
        (f"  bytes          : {r['bytes_total']:,} payload / {r['wire_bytes_total']:,} on the wire, "
        f"{r['communication_rounds']} server-client flights"),
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


def _number(v: float) -> str:
    return str(v) if isinstance(v, int) else f"{v:.4f}"


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

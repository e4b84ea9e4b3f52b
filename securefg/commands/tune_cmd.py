"""``securefg tune``: choose a method's hyperparameters on validation data, record the study, and
optionally write the choice as the dataset's preset."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path
from typing import Any

from securefg.errors import ConfigError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tune", help="search a method's hyperparameters on validation data (Optuna) and record the study",
        description="Search a method's documented hyperparameters with Optuna (TPE, seeded; median pruning) on the "
                    "validation split only: each trial's score is the mean over --seeds of the best per-round "
                    "validation score; test scores are stripped before anything is read. The first trial is the "
                    "values a run uses today (preset or defaults). The study (every trial, its per-seed validation "
                    "scores, state and seconds) is written as JSON; --write-preset makes the choice the "
                    "dataset's preset.")
    p.add_argument("--method", required=True, help="fedpub, fedsheafhn, fedstruct, fedsage or fedsage_plus")
    p.add_argument("--dataset", required=True, help="a node dataset (Cora, CiteSeer, Computers, ...) or csbm")
    p.add_argument("--partition", default=None, help="node partition (default: metis, as securefg run)")
    p.add_argument("--clients", type=int, default=10, help="number of clients (default: 10)")
    p.add_argument("--rounds", type=int, default=100, help="rounds per run (default: 100)")
    p.add_argument("--trials", type=int, default=20, help="most trials (default: 20)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="run seeds of every trial (default: 0 1)")
    p.add_argument("--data-seed", type=int, default=None, help="seed of the split and partition (default: each run seed)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="start no trial after S seconds (default: none)")
    p.add_argument("--params", default=None,
                   help="comma-separated subset of the search space to tune, e.g. lr,weight_decay (default: all)")
    p.add_argument("--range", action="append", default=[], metavar="NAME=LOW:HIGH[:STEP]",
                   help="search NAME over LOW..HIGH (every STEP) instead of its documented range, repeatable, "
                        "e.g. local_epochs=15:45:15 when an earlier study's best sat at the top; the study "
                        "records the range it searched")
    p.add_argument("--protocol", default="plaintext", help="stack of every trial (default: plaintext)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a fixed method option for every trial, repeatable")
    p.add_argument("--hidden", type=int, default=0, help="hidden width (default: 0 = the method's)")
    p.add_argument("--sampler-seed", type=int, default=0, help="TPE sampler seed (default: 0)")
    p.add_argument("--data-root", default=None, metavar="DIR", help="the data root (default: $SECUREFG_DATA)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda (default: auto)")
    p.add_argument("--study-out", default=None, metavar="PATH",
                   help="the study JSON (default: securefg/presets/studies/<method>_<dataset>_<partition>.json)")
    p.add_argument("--min-gain", type=float, default=0.005, metavar="G",
                   help="the best trial replaces today's values (trial 0) only if its mean validation score is "
                        "higher by more than G (default: 0.005, half a point: two seeds move by about that)")
    p.add_argument("--write-preset", action="store_true",
                   help="write the chosen values into securefg/presets/<method>.toml with source = \"study:...\"")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from securefg.commands.run_cmd import parse_options
    from securefg.presets.loader import canonical_dataset, presets_dir
    from securefg.run_config import RunConfig, dataset_kind, resolved_partition
    from securefg.tuning.spaces import space_for, with_ranges

    if dataset_kind(args.dataset) != "node":
        raise ConfigError("securefg tune searches node-classification methods; --dataset must be a node dataset")
    space = with_ranges(space_for(args.method, [s for s in args.params.split(",") if s] if args.params else None),
                        args.range)
    if args.trials < 1 or not args.seeds:
        raise ConfigError("--trials must be >= 1 and --seeds name at least one seed")
    dataset = canonical_dataset(args.dataset)
    partition = resolved_partition(dataset, args.partition)
    base = RunConfig(method=args.method, dataset=dataset, partition=partition, clients=args.clients,
                     rounds=args.rounds, protocol=args.protocol, data_seed=args.data_seed, data_root=args.data_root,
                     device=args.device, hidden=args.hidden, options=parse_options(args.option), progress=False)
    method = base.method.lower().replace("-", "_")
    out = Path(args.study_out) if args.study_out else presets_dir() / "studies" / f"{method}_{dataset}_{partition}.json"
    from securefg.tuning.study import TuneSpec, run_study

    record = run_study(TuneSpec(base=base, space=space, seeds=list(args.seeds), trials=args.trials,
                                timeout=args.timeout, sampler_seed=args.sampler_seed,
                                command=command_line(args), progress=True, min_gain=args.min_gain))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(render_study(record, out))
    if args.write_preset:
        table = write_preset(record, study_path=out, method=method, dataset=dataset, partition=partition, base=base)
        print(f"preset: wrote [{dataset}.{partition}] in {table}")
    return 0


def write_preset(record: dict[str, Any], *, study_path: Path, method: str, dataset: str, partition: str,
                 base: Any) -> Path:
    """Write the study's choice as the table of ``dataset``/``partition``; values the study did not
    search are kept from the table it replaces (named in ``reference``)."""
    from securefg.presets.loader import preset_for, presets_dir
    from securefg.presets.writer import write_table
    from securefg.tuning.spaces import OPTION_PREFIX

    folder = presets_dir()
    previous = preset_for(method, dataset, partition)
    values = dict(previous.train_values()) if previous is not None else {}
    options = dict(previous.options) if previous is not None else {}
    for key, value in record["chosen"].items():
        if key.startswith(OPTION_PREFIX):
            options[key[len(OPTION_PREFIX):]] = value
        else:
            values[key] = value
    kept = sorted((set(values) | {f"options.{k}" for k in options}) - set(record["chosen"]))
    reference = (f"securefg tune: {len(record['trials'])} trials, seeds {record['seeds']}, {record['rounds']} rounds, "
                 f"{record['clients']} clients, validation only")
    origin = ("the previous table" if previous is None else previous.source if previous.source.startswith("study:")
              else f"the previous table ({previous.source}: {previous.reference})")
    sel = record.get("selection") or {}
    if record.get("chosen_trial") == 0 and not sel.get("kept_first"):
        reference += f"; the starting values (trial 0, from {origin}) scored best, so they stay"
    elif sel.get("kept_first"):
        reference += (f"; no trial beat the starting values (trial 0, from {origin}) by more than "
                      f"{sel['min_gain']} validation, so they stay")
    if kept and previous is not None:
        reference += f"; not searched, kept from {origin}: {kept}"
    path = folder / f"{method}.toml"
    write_table(path, method=method, dataset=dataset, partition=partition,
                source="study:" + Path(os.path.relpath(study_path.resolve(), folder.resolve())).as_posix(),
                reference=reference, values=values, options=options)
    return path


def render_study(record: dict[str, Any], out: Path) -> str:
    """One line per trial (state, per-seed validation scores, seconds) and the choice."""
    lines = [(f"{record['method']} on {record['dataset']} ({record['partition']}, {record['clients']} clients, "
             f"{record['rounds']} rounds, seeds {record['seeds']}): {len(record['trials'])} trials, "
             f"{record['seconds_total']} s; validation only")]
    for t in record["trials"]:
        vals = " ".join(f"{s['best_val']:.4f}" for s in t["val_scores"])
        value = f"{t['value']:.4f}" if "value" in t else "-"
        params = ", ".join(f"{k}={_short(v)}" for k, v in t["params"].items())
        lines.append(f"  #{t['number']:<3} {t['state']:<8} mean {value}  [{vals}]  {t.get('seconds', 0):.0f} s  {params}")
    sel = record.get("selection") or {}
    if sel.get("kept_first"):
        lines.append(f"trial #{sel['best_trial']} led trial #0 by {sel['gain_over_first']:.4f}, not more than "
                     f"--min-gain {sel['min_gain']}: today's values stay")
    lines.append(f"chosen (trial #{record['chosen_trial']}, mean validation {record['chosen_value']:.4f}; "
                 f"first trial = today's values: {record['baseline_value']}): "
                 + ", ".join(f"{k}={_short(v)}" for k, v in record["chosen"].items()))
    lines.append(f"study: {out}")
    return "\n".join(lines)


def _short(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def command_line(args: argparse.Namespace) -> str:
    """The ``securefg tune`` command these arguments are (for the study record)."""
    parts = ["securefg", "tune"]
    for key, value in sorted(vars(args).items()):
        if key in ("func", "command", "debug") or value in (None, False, []):
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif isinstance(value, list):
            parts += [flag, *map(str, value)] if key == "seeds" else [x for v in value for x in (flag, str(v))]
        else:
            parts += [flag, str(value)]
    return shlex.join(parts)

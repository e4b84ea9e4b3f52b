"""``securefg reproduce cefgc``: the CeFGC paper's comparison, resumable, table and plots at the end."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

DEFAULT_OUT = "runs/reproduce_cefgc"
DEFAULT_PAGE = "docs/results/cefgc.md"


def register(sub: Any) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's comparison table (resumable)")
    targets = p.add_subparsers(dest="paper", required=True)
    c = targets.add_parser("cefgc", help="CeFGC, its variants, FedAvg, FedProx and the central GIN over settings and seeds")
    c.add_argument("--quick", action="store_true",
                   help="one seed of MUTAG and PROTEINS with CeFGC, CeFGC+, FedAvg and the central GIN")
    c.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: 0-4; --quick: 0)")
    c.add_argument("--datasets", nargs="+", default=None,
                   help="settings: MUTAG ENZYMES PROTEINS IMDB-BINARY IMDB-MULTI Protein Social Mix (default: all)")
    c.add_argument("--methods", nargs="+", default=None,
                   help="cefgc cefgc_star cefgc_plus cefgc_star_plus fedavg fedprox centralized (default: all)")
    c.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    c.add_argument("--out", default=DEFAULT_OUT, help=f"output root, one folder per cell (default: {DEFAULT_OUT})")
    c.add_argument("--generator-cache", default=None, help="CeFGC generator cache (default: <out>/generators)")
    c.add_argument("--data-root", default=None, help="dataset root (default: $SECUREFG_DATA, else the user cache)")
    c.add_argument("--page", default=DEFAULT_PAGE, help=f"results page; PNGs go beside it (default: {DEFAULT_PAGE})")
    c.add_argument("--ledger", default=None,
                   help="committed record of finished cells, read and extended (default: <page stem>_cells.json "
                        "beside the page, i.e. docs/results/cefgc_cells.json; 'none' = off)")
    c.add_argument("--targets", default=None, help="targets file with the paper's cells (default: ../shared/reference/targets.md)")
    c.add_argument("--dry-run", action="store_true", help="list the cells (and which are finished) and stop")
    c.add_argument("--no-report", action="store_true", help="run the cells but do not write the page and plots")
    c.add_argument("--report-only", action="store_true",
                   help="run nothing: record finished run folders in the ledger and rewrite the page and plots")
    c.set_defaults(func=run)


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this invocation (defaults left out)."""
    parts = ["securefg", "reproduce", "cefgc"]
    if args.quick:
        parts.append("--quick")
    if getattr(args, "report_only", False):
        parts.append("--report-only")
    for flag, values in (("--seeds", args.seeds), ("--datasets", args.datasets), ("--methods", args.methods)):
        if values is not None:
            parts += [flag, *map(str, values)]
    for flag, value, default in (("--device", args.device, "auto"), ("--out", args.out, DEFAULT_OUT),
                                 ("--generator-cache", args.generator_cache, None), ("--page", args.page, DEFAULT_PAGE),
                                 ("--ledger", args.ledger, None),
                                 ("--targets", args.targets, None)):
        if value != default:
            parts += [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from securefg.reproduce.cefgc_cells import plan
    from securefg.reproduce.cefgc_report import COMMAND_LOG, write_report
    from securefg.reproduce.cell_ledger import CellLedger
    from securefg.reproduce.cell_runner import finished_result, run_cells
    from securefg.reproduce.paper_cells import paper_cells

    cells = plan(settings=args.datasets, methods=args.methods, seeds=args.seeds, quick=args.quick)
    paper, source = paper_cells(args.targets)  # read first: a bad targets file fails before hours of runs
    ledger_path = args.ledger or Path(args.page).with_name(f"{Path(args.page).stem}_cells.json")
    ledger = None if str(ledger_path).lower() == "none" else CellLedger(ledger_path)
    if args.dry_run:
        for cell in cells:
            done = finished_result(cell, args.out) or (ledger and ledger.get(cell.setting.name, cell.method.name, cell.seed))
            print(f"{cell}: {'finished' if done else 'to run'} ({cell.folder(args.out)})")
        return 0
    if args.report_only:
        plots = write_report(out_root=args.out, page=args.page, command=command_line(args), paper=paper,
                             paper_source=source, ledger=ledger)
        print(f"wrote {args.page} and {len(plots)} plot(s); ran nothing")
        return 0
    cache = args.generator_cache or str(Path(args.out) / "generators")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with (Path(args.out) / COMMAND_LOG).open("a", encoding="utf-8") as log:  # the page lists every invocation
        log.write(command_line(args) + "\n")
    if ledger is not None:
        ledger.add_command(command_line(args))
    outcomes = run_cells(cells, out_root=args.out, device=args.device, data_root=args.data_root, generator_cache=cache,
                         ledger=ledger)
    ran = sum(o.status == "ran" for o in outcomes)
    kept = sum(o.status == "done" for o in outcomes)
    failed = [o for o in outcomes if o.status == "failed"]
    print(f"{len(cells)} cells: {ran} ran, {kept} were finished already, {len(failed)} failed")
    for o in failed:
        print(f"  failed: {o.cell}: {o.error}")
    if not args.no_report:
        plots = write_report(out_root=args.out, page=args.page, command=command_line(args), paper=paper, paper_source=source,
                             ledger=ledger)
        print(f"wrote {args.page} and {len(plots)} plot(s)")
    return 1 if failed else 0

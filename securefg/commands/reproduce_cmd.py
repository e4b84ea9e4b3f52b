"""``securefg reproduce cefgc``: the CeFGC paper's comparison, resumable, table and plots at the end.

Two kinds of finished cell: a run folder under ``--out`` (run on this machine) and a record in the
ledger (``docs/results/cefgc_cells.json``, committed: run on some machine, earlier). A recorded
cell is not rerun, so the full comparison on a fresh clone runs only what no machine finished;
the summary line counts the two kinds apart. ``--quick`` is the command a newcomer runs to see
the methods work: it reads no ledger, writes its page and plots under its own output folder
(``runs/reproduce_cefgc_quick/cefgc_quick.md``, never the committed page) and so runs its 8
cells on a fresh clone (about 12 minutes on a 2-core laptop).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

DEFAULT_OUT = "runs/reproduce_cefgc"
DEFAULT_PAGE = "docs/results/cefgc.md"
QUICK_OUT = "runs/reproduce_cefgc_quick"
QUICK_PAGE_NAME = "cefgc_quick.md"


def register(sub: Any) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's comparison table (resumable)")
    targets = p.add_subparsers(dest="paper", required=True)
    c = targets.add_parser(
        "cefgc", help="CeFGC, its variants, FedAvg, FedProx and the central GIN over settings and seeds",
        description="Run the CeFGC paper's comparison cell by cell (setting x method x seed), then write the "
                    "results page and plots. A cell finished under --out, or recorded in the ledger, is not rerun.")
    c.add_argument("--quick", action="store_true",
                   help=f"one seed of MUTAG and PROTEINS with CeFGC, CeFGC+, FedAvg and the central GIN (8 cells, "
                        f"about 12 min on a laptop); reads no ledger and writes under {QUICK_OUT}, so it always runs "
                        "here")
    c.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: 0-4; --quick: 0)")
    c.add_argument("--datasets", nargs="+", default=None,
                   help="settings: MUTAG ENZYMES PROTEINS IMDB-BINARY IMDB-MULTI Protein Social Mix (default: all)")
    c.add_argument("--methods", nargs="+", default=None,
                   help="cefgc cefgc_star cefgc_plus cefgc_star_plus fedavg fedprox centralized (default: all)")
    c.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N (default: auto)")
    c.add_argument("--out", default=None,
                   help=f"output root, one folder per cell (default: {DEFAULT_OUT}; --quick: {QUICK_OUT})")
    c.add_argument("--generator-cache", default=None, help="CeFGC generator cache (default: <out>/generators)")
    c.add_argument("--data-root", default=None, help="dataset root (default: $SECUREFG_DATA, else the user cache)")
    c.add_argument("--page", default=None,
                   help=f"results page; PNGs go beside it (default: {DEFAULT_PAGE}; --quick: <out>/{QUICK_PAGE_NAME})")
    c.add_argument("--ledger", default=None,
                   help="committed record of finished cells, read and extended (default: <page stem>_cells.json "
                        "beside the page, i.e. docs/results/cefgc_cells.json; --quick: none; 'none' = off, which "
                        "reruns recorded cells here)")
    c.add_argument("--targets", default=None, help="targets file with the paper's cells (default: ../shared/reference/targets.md)")
    c.add_argument("--dry-run", action="store_true", help="list the cells (and which are finished, and where) and stop")
    c.add_argument("--no-report", action="store_true", help="run the cells but do not write the page and plots")
    c.add_argument("--report-only", action="store_true",
                   help="run nothing: record finished run folders in the ledger and rewrite the page and plots")
    c.set_defaults(func=run)


def resolve_paths(args: argparse.Namespace) -> tuple[str, str, Path | None]:
    """``(output root, page, ledger or None)`` with ``--quick``'s own defaults."""
    out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    page = args.page or (str(Path(out) / QUICK_PAGE_NAME) if args.quick else DEFAULT_PAGE)
    if args.ledger is not None:
        ledger = None if str(args.ledger).lower() == "none" else Path(args.ledger)
    else:
        ledger = None if args.quick else Path(page).with_name(f"{Path(page).stem}_cells.json")
    return out, page, ledger


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
    for flag, value, default in (("--device", args.device, "auto"), ("--out", args.out, None),
                                 ("--generator-cache", args.generator_cache, None), ("--page", args.page, None),
                                 ("--ledger", args.ledger, None),
                                 ("--targets", args.targets, None)):
        if value != default:
            parts += [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def run(args: argparse.Namespace) -> int:
    from securefg.reproduce.cefgc_cells import plan
    from securefg.reproduce.cefgc_report import COMMAND_LOG, write_report
    from securefg.reproduce.cell_ledger import CellLedger
    from securefg.reproduce.cell_runner import finished_result, run_cells
    from securefg.reproduce.paper_cells import paper_cells

    cells = plan(settings=args.datasets, methods=args.methods, seeds=args.seeds, quick=args.quick)
    paper, source = paper_cells(args.targets)  # read first: a bad targets file fails before hours of runs
    out, page, ledger_path = resolve_paths(args)
    ledger = None if ledger_path is None else CellLedger(ledger_path)
    if args.dry_run:
        for cell in cells:
            here = (cell.folder(out) / "result.json").is_file()
            done = finished_result(cell, out, ledger)
            state = (f"finished ({cell.folder(out)})" if here else
                     f"recorded in {ledger_path}, not rerun" if done else f"to run ({cell.folder(out)})")
            print(f"{cell}: {state}")
        return 0
    if args.report_only:
        plots = write_report(out_root=out, page=page, command=command_line(args), paper=paper,
                             paper_source=source, ledger=ledger)
        print(f"wrote {page} and {len(plots)} plot(s); ran nothing")
        return 0
    cache = args.generator_cache or str(Path(out) / "generators")
    Path(out).mkdir(parents=True, exist_ok=True)
    with (Path(out) / COMMAND_LOG).open("a", encoding="utf-8") as log:  # the page lists every invocation
        log.write(command_line(args) + "\n")
    if ledger is not None:
        ledger.add_command(command_line(args))
    outcomes = run_cells(cells, out_root=out, device=args.device, data_root=args.data_root, generator_cache=cache,
                         ledger=ledger)
    counts = {k: sum(o.status == k for o in outcomes) for k in ("ran", "done", "recorded", "failed")}
    parts = [f"{counts['ran']} ran here", f"{counts['done']} were finished already under {out}"]
    if counts["recorded"]:
        parts.append(f"{counts['recorded']} are recorded in {ledger_path} from an earlier run and were not rerun "
                     "(--ledger none runs them here)")
    print(f"{len(cells)} cells: {', '.join(parts)}, {counts['failed']} failed")
    for o in outcomes:
        if o.status == "failed":
            print(f"  failed: {o.cell}: {o.error}")
    if not args.no_report:
        plots = write_report(out_root=out, page=page, command=command_line(args), paper=paper, paper_source=source,
                             ledger=ledger)
        print(f"wrote {page} and {len(plots)} plot(s)")
    return 1 if counts["failed"] else 0

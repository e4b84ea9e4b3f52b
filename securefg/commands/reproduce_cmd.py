"""``securefg reproduce cefgc|fedpub|fedsheafhn|fedstruct|fedsage``: a paper's table, resumable, page and plots at the end.

The node papers' tables (:mod:`securefg.reproduce.node_tables`) share the cell runner, ledger
and page machinery of CeFGC's; each runs every targets.md cell under the plaintext stack and the
method's protected default, with the paper's seed count.

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
#: Rounds between a node-table cell's checkpoints: hours-long cells outlive a working session.
DEFAULT_CHECKPOINT_EVERY = 10


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
    from securefg.reproduce.node_tables import TABLES

    for key, table in TABLES.items():
        t = targets.add_parser(
            key, help=f"{table.title.split(':')[0]}'s table in targets.md: every row, plaintext and protected, "
                      f"{len(table.seeds)} seeds",
            description=f"Run every cell of {table.title.split(':')[0]}'s table in targets.md (setting x row x stack x "
                        "seed), then write the results page and plots. A cell finished under --out, or recorded in "
                        "the ledger, is not rerun. Several of these side by side on a few cores: give each "
                        "OMP_NUM_THREADS=1 (a GCN step ran 3.5x faster that way beside two other jobs; docs/performance.md); "
                        "a cell another of them is running now is skipped, not run twice.")
        q = table.quick
        t.add_argument("--quick", action="store_true",
                       help=f"{len(q.settings)} setting(s) ({', '.join(q.settings)}), rows {', '.join(q.rows)}, seed(s) "
                            f"{' '.join(map(str, q.seeds))}, at most {q.overrides.rounds} rounds: shows the machinery "
                            f"in minutes (the figures are not comparable to the paper's); reads no ledger and writes "
                            f"under runs/reproduce_{key}_quick")
        t.add_argument("--seeds", type=int, nargs="+", default=None,
                       help=f"seeds (default: {' '.join(map(str, table.seeds))}, the paper's run count)")
        t.add_argument("--settings", nargs="+", default=None,
                       help=f"settings, quoted: {', '.join(repr(s.name) for s in table.settings)} (default: all)")
        t.add_argument("--rows", nargs="+", default=None,
                       help=f"rows (a label or a method name): {', '.join(repr(r.label) for r in table.rows)} "
                            "(default: all)")
        t.add_argument("--stacks", nargs="+", default=None, choices=("plaintext", "protected"),
                       help="plaintext and/or protected (the method's default stack) (default: both)")
        t.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N (default: auto)")
        t.add_argument("--checkpoint-every", type=int, default=DEFAULT_CHECKPOINT_EVERY, metavar="N",
                       help="a running cell checkpoints into its folder every N rounds, and an interrupted one "
                            "resumes from there when this command runs again (a finished cell deletes its "
                            f"checkpoint); 0 = none, an interrupted cell starts over (default: "
                            f"{DEFAULT_CHECKPOINT_EVERY})")
        t.add_argument("--out", default=None, help=f"output root, one folder per cell (default: runs/reproduce_{key})")
        t.add_argument("--data-root", default=None, help="dataset root (default: $SECUREFG_DATA, else the user cache)")
        t.add_argument("--page", default=None, help=f"results page; PNGs go beside it (default: docs/results/{key}.md)")
        t.add_argument("--ledger", default=None,
                       help=f"committed record of finished cells (default: docs/results/{key}_cells.json; --quick: "
                            "none; 'none' = off)")
        t.add_argument("--targets", default=None,
                       help="targets file with the paper's cells (default: ../shared/reference/targets.md)")
        t.add_argument("--dry-run", action="store_true", help="list the cells (and which are finished) and stop")
        t.add_argument("--no-report", action="store_true", help="run the cells but do not write the page and plots")
        t.add_argument("--report-only", action="store_true",
                       help="run nothing: record finished run folders in the ledger and rewrite the page and plots")
        t.set_defaults(func=run_table, table=key)


def resolve_paths(args: argparse.Namespace) -> tuple[str, str, Path | None]:
    """``(output root, page, ledger or None)`` with ``--quick``'s own defaults."""
    key = getattr(args, "table", None)
    default_out, default_page = (f"runs/reproduce_{key}", f"docs/results/{key}.md") if key else (DEFAULT_OUT, DEFAULT_PAGE)
    quick_out, quick_name = (f"{default_out}_quick", f"{key}_quick.md") if key else (QUICK_OUT, QUICK_PAGE_NAME)
    out = args.out or (quick_out if args.quick else default_out)
    page = args.page or (str(Path(out) / quick_name) if args.quick else default_page)
    if args.ledger is not None:
        ledger = None if str(args.ledger).lower() == "none" else Path(args.ledger)
    else:
        ledger = None if args.quick else Path(page).with_name(f"{Path(page).stem}_cells.json")
    return out, page, ledger


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this invocation (defaults left out)."""
    parts = ["securefg", "reproduce", getattr(args, "table", None) or "cefgc"]
    if args.quick:
        parts.append("--quick")
    if getattr(args, "report_only", False):
        parts.append("--report-only")
    for flag in ("--seeds", "--datasets", "--methods", "--settings", "--rows", "--stacks"):
        values = getattr(args, flag[2:], None)
        if values is not None:
            parts += [flag, *map(str, values)]
    for flag, value, default in (("--device", args.device, "auto"), ("--out", args.out, None),
                                 ("--generator-cache", getattr(args, "generator_cache", None), None),
                                 ("--page", args.page, None),
                                 ("--ledger", args.ledger, None),
                                 ("--targets", args.targets, None),
                                 ("--checkpoint-every", getattr(args, "checkpoint_every", DEFAULT_CHECKPOINT_EVERY),
                                  DEFAULT_CHECKPOINT_EVERY)):
        if value != default:
            parts += [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def run_logged(args: argparse.Namespace, cells: list[Any], out: str, ledger: Any, ledger_path: Path | None,
               **run_kwargs: Any) -> dict[str, int]:
    """Log the invocation (under ``out`` and in the ledger), run the unfinished cells, and print
    how many ran here, were finished already, are only recorded, or failed."""
    from securefg.reproduce.cell_ledger import COMMAND_LOG
    from securefg.reproduce.cell_runner import run_cells

    Path(out).mkdir(parents=True, exist_ok=True)
    with (Path(out) / COMMAND_LOG).open("a", encoding="utf-8") as log:  # the page lists every invocation
        log.write(command_line(args) + "\n")
    if ledger is not None:
        ledger.add_command(command_line(args))
    outcomes = run_cells(cells, out_root=out, device=args.device, data_root=args.data_root, ledger=ledger,
                         **run_kwargs)
    counts = {k: sum(o.status == k for o in outcomes) for k in ("ran", "done", "recorded", "busy", "failed")}
    parts = [f"{counts['ran']} ran here", f"{counts['done']} were finished already under {out}"]
    if counts["recorded"]:
        parts.append(f"{counts['recorded']} are recorded in {ledger_path} from an earlier run and were not rerun "
                     "(--ledger none runs them here)")
    if counts["busy"]:
        parts.append(f"{counts['busy']} were running in another process and were skipped (rerun this command "
                     "once it ends)")
    print(f"{len(cells)} cells: {', '.join(parts)}, {counts['failed']} failed")
    for o in outcomes:
        if o.status == "failed":
            print(f"  failed: {o.cell}: {o.error}")
    return counts


def print_dry_run(cells: list[Any], out: str, ledger: Any, ledger_path: Path | None, overrides: Any = None) -> None:
    """One line per cell: finished here, recorded in the ledger (not rerun), to run, or to run
    again (stale, as the run itself would judge it); then the counts and the runs left, each
    setting, row and stack timed by its own finished runs (:mod:`securefg.reproduce.runs_left`)."""
    from securefg.reproduce.cell_checkpoint import checkpoint_round
    from securefg.reproduce.cell_claim import holder
    from securefg.reproduce.cell_runner import finished_result, preset_change
    from securefg.reproduce.runs_left import FINISHED, RECORDED, STALE, TO_RUN, state_of, summary_lines

    states = []
    for cell in cells:
        here = (cell.folder(out) / "result.json").is_file()
        done = finished_result(cell, out, ledger)
        stale = None if done is None else preset_change(cell, done, overrides)
        kind = STALE if stale is not None else FINISHED if here else RECORDED if done else TO_RUN
        busy = holder(cell.folder(out)) if kind in (STALE, TO_RUN) else None
        resumes = checkpoint_round(cell.folder(out)) if kind == TO_RUN else None
        print(f"{cell}: " + {STALE: f"to run again: {stale} ({cell.folder(out)})",
                             FINISHED: f"finished ({cell.folder(out)})",
                             RECORDED: f"recorded in {ledger_path}, not rerun",
                             TO_RUN: f"to run ({cell.folder(out)})"}[kind]
              + (f"; resumes from its checkpoint at round {resumes}" if resumes is not None else "")
              + (f"; running now in {busy}" if busy is not None else ""))
        states.append(state_of(cell, kind, done))
    for line in summary_lines(states, ledger_path):
        print(line)


def run(args: argparse.Namespace) -> int:
    from securefg.reproduce.cefgc_cells import plan
    from securefg.reproduce.cefgc_report import write_report
    from securefg.reproduce.cell_ledger import CellLedger
    from securefg.reproduce.paper_cells import paper_cells

    cells = plan(settings=args.datasets, methods=args.methods, seeds=args.seeds, quick=args.quick)
    paper, source = paper_cells(args.targets)  # read first: a bad targets file fails before hours of runs
    out, page, ledger_path = resolve_paths(args)
    ledger = None if ledger_path is None else CellLedger(ledger_path)
    if args.dry_run:
        print_dry_run(cells, out, ledger, ledger_path)
        return 0
    if args.report_only:
        plots = write_report(out_root=out, page=page, command=command_line(args), paper=paper,
                             paper_source=source, ledger=ledger)
        print(f"wrote {page} and {len(plots)} plot(s); ran nothing")
        return 0
    cache = args.generator_cache or str(Path(out) / "generators")
    counts = run_logged(args, cells, out, ledger, ledger_path, generator_cache=cache)
    if not args.no_report:
        plots = write_report(out_root=out, page=page, command=command_line(args), paper=paper, paper_source=source,
                             ledger=ledger)
        print(f"wrote {page} and {len(plots)} plot(s)")
    return 1 if counts["failed"] else 0


def run_table(args: argparse.Namespace) -> int:
    """``securefg reproduce fedpub|fedsheafhn|fedstruct|fedsage``."""
    from securefg.errors import ConfigError
    from securefg.reproduce.cell_ledger import CellLedger
    from securefg.reproduce.gap_notes import gap_notes_path, load_gap_notes
    from securefg.reproduce.node_tables import TABLES, plan
    from securefg.reproduce.table_page import write_page

    table = TABLES[args.table]
    if args.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every must be >= 0 (0 = no checkpoints), got {args.checkpoint_every}")
    paper, source = table.paper(args.targets)  # read first: a bad targets file fails before hours of runs
    out, page, ledger_path = resolve_paths(args)
    gaps = load_gap_notes(gap_notes_path(page), paper)  # so is a bad notes file
    cells = plan(table, paper, settings=args.settings, rows=args.rows, stacks=args.stacks, seeds=args.seeds,
                 quick=args.quick)
    ledger = None if ledger_path is None else CellLedger(ledger_path)
    overrides = table.quick.overrides if args.quick else None
    note = (f"**Quick run**: at most {overrides.rounds} rounds and one seed, to show the machinery; these figures are not comparable "
            "to the paper's." if overrides is not None else "")
    if args.dry_run:
        print_dry_run(cells, out, ledger, ledger_path, overrides)
        return 0
    if not args.report_only:
        counts = run_logged(args, cells, out, ledger, ledger_path, overrides=overrides,
                            checkpoint_every=args.checkpoint_every)
        if args.no_report:
            return 1 if counts["failed"] else 0
    else:
        counts = {"failed": 0}
    plots = write_page(table, out_root=out, page=page, command=command_line(args), paper=paper, paper_source=source,
                       ledger=ledger, note=note, cells=cells if args.quick else None, gaps=gaps)
    print(f"wrote {page} and {len(plots)} plot(s)" + ("; ran nothing" if args.report_only else ""))
    return 1 if counts["failed"] else 0

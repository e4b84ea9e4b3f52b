"""``securefg audit --matrix`` (also ``securefg audit-matrix``): every method x every threat model.

Runs the plan of :mod:`securefg.audit.matrix.plan`, one ``securefg audit`` per cell, resumable;
traces the epsilon-utility curve of every declared release that exceeded its margin; writes
the page and its JSON. Exit 0: every cell passes or is a declared release with its curve;
1: a cell fails or a release lacks its curve; 3: an audit errored.
"""

from __future__ import annotations

import argparse
from typing import Any

MATRIX_FLAG = "--matrix"


def rewrite(argv: list[str]) -> list[str]:
    """``audit --matrix ...`` -> ``audit-matrix ...`` (the matrix takes none of audit's run options)."""
    for i, tok in enumerate(argv):
        if tok.startswith("-"):
            continue
        if tok == "audit" and MATRIX_FLAG in argv[i + 1:]:
            rest = [t for t in argv[i + 1:] if t != MATRIX_FLAG]
            return [*argv[:i], "audit-matrix", *rest]
        return argv
    return argv


def register(sub: Any) -> None:
    p = sub.add_parser(
        "audit-matrix", help="audit every method against every threat model (= securefg audit --matrix)",
        description="Run `securefg audit` for every method that exchanges messages against every shipped threat "
                    "model (default stack vs plaintext), trace the epsilon-utility curve of each declared release "
                    "that exceeds its margin, and write the privacy matrix page and its JSON. Resumable: a "
                    "finished cell in --out is not rerun (--fresh reruns).")
    p.add_argument("--quick", action="store_true",
                   help="synthetic datasets, 2 rounds (a few minutes; the test suite runs it); page under --out")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="cells and curves (default: runs/privacy_matrix, or runs/privacy_matrix_quick)")
    p.add_argument("--page", default=None, metavar="PATH",
                   help="the page to write, JSON beside it (default: docs/privacy-matrix.md; --quick: <out>/privacy-matrix.md)")
    p.add_argument("--methods", default=None, metavar="M,M", help="only these methods (e.g. fedavg,fedpub)")
    p.add_argument("--threat-models", default=None, metavar="TM,TM",
                   help="only these threat models (default: curious_server,curious_clients,malicious_client)")
    p.add_argument("--no-curves", action="store_true", help="skip the epsilon-utility curves of declared releases")
    p.add_argument("--fresh", action="store_true", help="rerun finished cells and curve points")
    p.add_argument("--render-only", action="store_true",
                   help="run nothing: write the page from the cells and curves already finished in --out "
                        "(missing or outdated cells are listed as not run)")
    p.add_argument("--restore-from", default=None, metavar="JSON",
                   help="first seed --out with the finished cells and curve points of a written matrix JSON (e.g. "
                        "docs/privacy-matrix.json), so a fresh checkout reruns only what changed and renders the "
                        "whole page; a restored cell whose run, stack or threat model changed still reruns")
    p.add_argument("--data-root", default=None, metavar="DIR", help="datasets folder (default: $SECUREFG_DATA)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from securefg.audit.matrix.command import run_matrix

    return int(run_matrix(args))


__all__ = ["register", "rewrite"]

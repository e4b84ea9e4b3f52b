"""``securefg`` command line: only wires subcommands; each lives in ``securefg/commands/``.

Every failure ends the same way: one ``securefg: error: ...`` message on stderr and exit code 2,
never a traceback unless ``securefg --debug ...`` asks for it. Typed errors
(:class:`~securefg.errors.SecureFGError`) carry a message saying what to do; anything else is an
unexpected failure, reported in one line with a pointer to ``--debug``. Commands that report a
verdict through their exit code (``securefg audit``: 0, 1, 3, 4) return it as before.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from securefg.errors import SecureFGError

#: Exit code of every failed command (argparse uses it for bad usage too).
EXIT_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    """Run one ``securefg`` command; return its exit code (:data:`EXIT_ERROR` on any error)."""
    from securefg.commands import (
        audit_cmd,
        audit_matrix_cmd,
        datasets_cmd,
        deploy_cmd,
        partition_cmd,
        reproduce_cmd,
        run_cmd,
        summarize_cmd,
        tune_cmd,
    )

    parser = argparse.ArgumentParser(prog="securefg", description="Secure aggregation for federated graph learning.")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error (before the subcommand)")
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in (run_cmd, datasets_cmd, partition_cmd, audit_cmd, audit_matrix_cmd, summarize_cmd, reproduce_cmd,
                deploy_cmd, tune_cmd):
        mod.register(sub)
    args = parser.parse_args(audit_matrix_cmd.rewrite(sys.argv[1:] if argv is None else list(argv)))
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("securefg: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI's last line: one message, not a traceback
        return report_error(exc, debug=args.debug)


def report_error(exc: Exception, *, debug: bool = False) -> int:
    """Print one ``securefg: error:`` line for ``exc`` (its traceback first with ``--debug``).

    Args:
        exc (Exception): The error a command raised.
        debug (bool, optional): Print the traceback too. (default: :obj:`False`)

    Returns:
        int: :data:`EXIT_ERROR`.
    """
    if debug:
        traceback.print_exception(exc)
    if isinstance(exc, SecureFGError):  # its message says what to do (problem lists keep their lines)
        text = f"{type(exc).__name__}: {exc}"
    else:
        text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if not isinstance(exc, OSError):  # not a file the user named: a bug to report
            text = f"unexpected {text}" + ("" if debug else " (run `securefg --debug ...` for the traceback)")
    print(f"securefg: error: {text}", file=sys.stderr)
    return EXIT_ERROR


def console_main() -> int:
    """The ``securefg`` command and ``python -m securefg``: :func:`main` in a process whose
    allocator keeps freed large buffers (:mod:`securefg.allocator`; tests call :func:`main`
    and leave their process's allocator alone)."""
    from securefg.allocator import keep_large_buffers

    keep_large_buffers()
    return main()


if __name__ == "__main__":
    sys.exit(console_main())

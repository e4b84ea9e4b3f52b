"""Running a federation across hosts: ``securefg keys``, ``securefg certs``, ``securefg config``, ``securefg party``.

The walk-through is ``docs/flower.md``, "Deploy on several hosts". Every command here writes or
reads files one party (or the coordinator) holds; only public files travel between hosts.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    keys = sub.add_parser("keys", help="channel keys: a party's own key pair, the coordinator's pinned directory")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    p = ksub.add_parser("new", help="make this party's key pair: OUT/private.key (0600) and OUT/public.json")
    p.add_argument("--id", required=True, help="the party id: server, client/<k>, or a helper such as keyholder")
    p.add_argument("--out", type=Path, required=True, help="this party's key folder")
    p.add_argument("--force", action="store_true", help="overwrite an existing private.key")
    p.set_defaults(func=keys_new)
    p = ksub.add_parser("directory", help="collect the parties' public.json files into the pinned directory")
    p.add_argument("--out", type=Path, required=True, help="the directory file to write (e.g. directory.json)")
    p.add_argument("public", type=Path, nargs="+", help="every party's public.json")
    p.set_defaults(func=keys_directory)

    p = sub.add_parser("certs", help="TLS for the server: OUT/ca.pem (clients pin it), OUT/server.pem, OUT/server.key")
    p.add_argument("--out", type=Path, required=True, help="folder to write (the server's key folder)")
    p.add_argument("--host", action="append", required=True,
                   help="a name or address clients dial the server by (repeatable); goes into the certificate")
    p.add_argument("--days", type=int, default=365, help="validity (default 365)")
    p.set_defaults(func=certs)

    from securefg.commands.run_cmd import add_run_options

    p = sub.add_parser("config", help="write a run file (the run's options and a fresh session id) for securefg party")
    add_run_options(p)
    p.add_argument("--out", type=Path, required=True, help="the run file to write, e.g. run.toml")
    p.set_defaults(func=config)

    from securefg.integrations.flower.party import add_party_options

    p = sub.add_parser("party", help="run one party of a Flower deployment (server, client or helper) on this host")
    add_party_options(p)
    p.set_defaults(func=party)


def keys_new(args: argparse.Namespace) -> int:
    from securefg.integrations.flower.deploy import PRIVATE_KEY, new_keys

    public = new_keys(args.id, args.out, force=args.force)
    print(f"{args.id}: private key {args.out / PRIVATE_KEY} (keep it here), public key {public} (hand this out)")
    return 0


def keys_directory(args: argparse.Namespace) -> int:
    from securefg.integrations.flower.deploy import build_directory

    directory = build_directory(args.public, args.out)
    print(f"{args.out}: {len(directory)} parties ({', '.join(directory)}); give every party a copy")
    return 0


def certs(args: argparse.Namespace) -> int:
    from securefg.integrations.flower.deploy import make_certs

    paths = make_certs(args.out, args.host, days=args.days)
    print(f"{paths['ca']} (give every client and helper a copy), {paths['cert']} and {paths['key']} "
          f"(the server's alone), for {', '.join(args.host)}")
    return 0


def config(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from securefg.commands.run_cmd import config_from_args
    from securefg.integrations.flower.deploy import write_run_file

    out = args.out
    args.out = None
    cfg = replace(config_from_args(args), out=None)
    write_run_file(out, cfg)
    print(f"{out}: {cfg.method} on {cfg.dataset}, {cfg.clients} clients, {cfg.rounds} rounds, with a fresh "
          f"session id; give every party a copy")
    return 0


def party(args: argparse.Namespace) -> int:
    import logging
    import sys

    from securefg.integrations.flower.party import run_party

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return run_party(args)

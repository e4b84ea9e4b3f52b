"""Communication accounting read from the transcript: flights, paper rounds, bytes per phase.

A *flight* is a maximal run of server-client envelopes in one direction; the transcript's
``communication_rounds()`` counts them (the CeFGC paper's round: "a single exchange of data
between the server and clients, in either direction"). Traffic with a helper party (the
``keyholder``) or between peers starts no flight; it is listed separately, attached to the
flight it happened in, so nothing is hidden from the byte totals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from securefg.federation.transcript import Record, Transcript


def flights(transcript: Transcript | Iterable[Record]) -> list[dict[str, Any]]:
    """Every server-client flight: direction, bytes, envelopes, and bytes per tag/stage."""
    out: list[dict[str, Any]] = []
    last = None
    for r in transcript:
        d = r.direction
        if d not in ("up", "down"):
            continue
        if d != last:
            out.append({"flight": len(out) + 1, "direction": d, "bytes": 0, "envelopes": 0, "by_tag": defaultdict(int)})
            last = d
        f = out[-1]
        f["bytes"] += r.payload_bytes
        f["envelopes"] += 1
        f["by_tag"][f"{r.tag} [{r.stage}]"] += r.payload_bytes
    for f in out:
        f["by_tag"] = dict(f["by_tag"])
    return out


def helper_traffic(transcript: Transcript | Iterable[Record]) -> list[dict[str, Any]]:
    """Traffic that is not server-client (keyholder, peers), grouped by tag, stage and route."""
    groups: dict[tuple[int, str, str, str, str], list[int]] = {}
    flight, last = 0, None
    for r in transcript:
        d = r.direction
        if d in ("up", "down"):
            if d != last:
                flight, last = flight + 1, d
            continue
        route = (_role(r.sender), _role(r.receiver))
        key = (flight, r.tag, r.stage, *route)
        groups.setdefault(key, [0, 0])
        groups[key][0] += r.payload_bytes
        groups[key][1] += 1
    return [
        {"during_flight": k[0], "tag": k[1], "stage": k[2], "route": f"{k[3]}->{k[4]}", "bytes": v[0], "envelopes": v[1]}
        for k, v in groups.items()
    ]


def _role(pid: str) -> str:
    return "client" if pid.startswith("client/") else pid


def paper_rounds(fl: list[dict[str, Any]], *, upload_tags: Iterable[str], download_tags: Iterable[str],
                 weights_tag: str) -> dict[str, Any]:
    """Map flights to the paper's three rounds (R1 up, R2 down, R3 up) and count the extra ones.

    R1 = flights carrying model uploads, R2 = flights carrying the model bundles or W0, R3 =
    flights carrying the GNN weights' aggregate (SecAgg+ needs several; CKKS one).
    """
    up, down = set(upload_tags), set(download_tags)

    def carries(f: Mapping[str, Any], tags: set[str]) -> bool:
        return any(k.split(" [")[0] in tags for k in f["by_tag"])

    r1 = [f["flight"] for f in fl if f["direction"] == "up" and carries(f, up)]
    r2 = [f["flight"] for f in fl if f["direction"] == "down" and carries(f, down)]
    r3 = [f["flight"] for f in fl if carries(f, {weights_tag})]
    return {
        "paper_rounds": 3,
        "flights": len(fl),
        "R1_flights": r1, "R2_flights": r2, "R3_flights": r3,
        "R1_bytes": _tag_bytes(fl, up, "up"),
        "R2_bytes": _tag_bytes(fl, down, "down"),
        "R3_bytes": _tag_bytes(fl, {weights_tag}, None),
    }


def _tag_bytes(fl: list[dict[str, Any]], tags: set[str], direction: str | None) -> int:
    return sum(
        b for f in fl if direction in (None, f["direction"]) for k, b in f["by_tag"].items() if k.split(" [")[0] in tags
    )


__all__ = ["flights", "helper_traffic", "paper_rounds"]

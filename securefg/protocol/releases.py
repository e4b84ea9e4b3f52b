"""What a stack releases by design: results a receiver must read, which no mechanism hides.

A stack's mechanisms protect messages in transit and their individual inputs; they cannot
hide the output the receiver is meant to read (FED-PUB's cosines at the server, FedStruct's
Ā rows at each client, ...). A stack names such outputs in ``[[releases]]`` tables, each with
the attacks that measure it and the DP knob that trades it against accuracy::

    [[releases]]
    tag = "fedpub/embedding"
    to = ["server"]
    what = "the cosine matrix of the clients' functional embeddings"
    attacks = ["community_inference"]
    knob = { stack = "fedpub_dp", tag = "fedpub/embedding", param = "noise_multiplier", values = [0.3, 1.0, 3.0] }
    # or an option knob: knob = { option = "edge_dp_epsilon", values = [2, 4, 8], with = { edge_dp_local_graph = true } }

``securefg audit --matrix`` marks an exceeded budget on such an attack as a declared release
(not a pass) and traces the knob's epsilon-utility curve beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PARTIES = ("server", "clients", "keyholder", "shuffler")
_RELEASE_KEYS = {"tag", "to", "what", "attacks", "knob"}
_KNOB_KEYS = {"stack", "tag", "param", "option", "values", "with"}


@dataclass(frozen=True)
class ReleaseKnob:
    """The DP setting that trades a release against accuracy, and the values a curve visits.

    Either a stack knob (``stack``: a shipped stack whose ``tag`` binding has a transform with
    ``param``; each value replaces it) or a method option (``option``; ``with`` holds the
    options that must accompany it).
    """

    values: tuple[float, ...]
    stack: str | None = None
    tag: str | None = None
    param: str | None = None
    option: str | None = None
    with_options: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        if self.option is not None:
            extra = "".join(f" --option {k}={_option_text(v)}" for k, v in self.with_options.items())
            return f"--option {self.option}=<value>{extra}"
        return f"stack {self.stack}: {self.tag} transform {self.param}=<value>"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"values": list(self.values)}
        for k in ("stack", "tag", "param", "option"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.with_options:
            out["with"] = dict(self.with_options)
        return out


@dataclass(frozen=True)
class DeclaredRelease:
    """One by-design release of a stack."""

    tag: str
    to: tuple[str, ...]
    what: str
    attacks: tuple[str, ...]
    knob: ReleaseKnob | None = None

    def covers(self, attack: str) -> bool:
        return attack in self.attacks

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tag": self.tag, "to": list(self.to), "what": self.what, "attacks": list(self.attacks)}
        if self.knob is not None:
            out["knob"] = self.knob.to_dict()
        return out


def _option_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_releases(raw: object, problems: list[str]) -> tuple[DeclaredRelease, ...]:
    """Validate ``[[releases]]``; append one line per problem to ``problems``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append("'releases' must be an array of tables ([[releases]])")
        return ()
    out = []
    for i, body in enumerate(raw):
        where = f"releases[{i}]"
        if not isinstance(body, Mapping):
            problems.append(f"{where} must be a table")
            continue
        problems.extend(f"{where}: unknown key {k!r} (known: {sorted(_RELEASE_KEYS)})" for k in sorted(set(body) - _RELEASE_KEYS))
        tag, what = body.get("tag"), body.get("what", "")
        to, attacks = body.get("to"), body.get("attacks")
        ok = True
        if not isinstance(tag, str) or not tag:
            problems.append(f"{where}: 'tag' must be a message tag (pattern)")
            ok = False
        if not isinstance(what, str):
            problems.append(f"{where}: 'what' must be a string")
            ok = False
        if not isinstance(to, list) or not to or any(p not in PARTIES for p in to):
            problems.append(f"{where}: 'to' must list parties among {list(PARTIES)}, got {to!r}")
            ok = False
        if not isinstance(attacks, list) or not attacks or not all(isinstance(a, str) for a in attacks):
            problems.append(f"{where}: 'attacks' must list the attacks that measure the release")
            ok = False
        knob = _knob(body.get("knob"), where, problems)
        if ok:
            out.append(DeclaredRelease(str(tag), tuple(to), str(what), tuple(attacks), knob))  # type: ignore[arg-type]
    return tuple(out)


def _knob(raw: object, where: str, problems: list[str]) -> ReleaseKnob | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: 'knob' must be a table")
        return None
    problems.extend(f"{where}.knob: unknown key {k!r} (known: {sorted(_KNOB_KEYS)})" for k in sorted(set(raw) - _KNOB_KEYS))
    values = raw.get("values")
    if (not isinstance(values, list) or len(values) < 3
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
                       for v in values)):
        problems.append(f"{where}.knob: 'values' must list at least three positive numbers (a curve), got {values!r}")
        return None
    with_options = raw.get("with", {})
    if not isinstance(with_options, Mapping):
        problems.append(f"{where}.knob: 'with' must be a table of method options")
        return None
    option = raw.get("option")
    stack_keys = [raw.get(k) for k in ("stack", "tag", "param")]
    if option is not None and any(k is not None for k in stack_keys):
        problems.append(f"{where}.knob: give either 'option' or 'stack'/'tag'/'param', not both")
        return None
    if option is None and not all(isinstance(k, str) and k for k in stack_keys):
        problems.append(f"{where}.knob: needs 'option', or all of 'stack', 'tag' and 'param'")
        return None
    if option is not None and not isinstance(option, str):
        problems.append(f"{where}.knob: 'option' must be a method option name")
        return None
    stack, tag, param = stack_keys
    return ReleaseKnob(tuple(float(v) for v in values), stack=stack, tag=tag, param=param, option=option,
                       with_options=dict(with_options))


__all__ = ["PARTIES", "DeclaredRelease", "ReleaseKnob", "parse_releases"]

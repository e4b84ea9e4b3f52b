"""Protocol stacks: which mechanism carries which message tag, read from TOML.

A stack file binds tag patterns (exact tags or globs such as ``"fedavg/*"``) to a mechanism
and its parameters, plus optional transforms (DP noise, clipping)::

    name = "fedavg_secure_sum"
    description = "FedAvg updates through SecAgg+; the model broadcast in the clear."

    [tags."fedavg/model"]
    mechanism = "plaintext"

    [tags."fedavg/update"]
    mechanism = "secure_sum"
    params = { threshold = 0.7 }
    transforms = [{ name = "dp_gaussian", noise_multiplier = 1.0, clip = 1.0 }]

``wire_dtype`` (``"float32"``, ``"float16"`` or ``"bfloat16"``) on a tensor exchange
(``broadcast``, ``send``, ``reply``) sends its floating tensors at that precision; the receiver
gets them back in their own dtype. Leave it out to send tensors as they are.

A setting that is valid but voids a protection (a secure-sum threshold an equivocating server
beats, seeded DP noise, a sampling discount without sampling, CKKS decryptions without output
noise; :mod:`securefg.protocol.guarantees`) is refused like an invalid one, unless the binding
or the whole stack says ``unsafe = "<reason>"``. The stack then loads and lists the protection
in :attr:`ProtocolStack.failed_protections`, which every result reports.

Every problem in a file is collected and raised once as a :class:`ConfigError` with one line
per problem and the file path. A tag no pattern matches is an error, never plaintext.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from securefg.errors import ConfigError, UnboundTagError
from securefg.protocol.guarantees import FailedProtection, refusal, unsafe_problem
from securefg.protocol.mechanism import (
    ExchangeKind,
    Mechanism,
    Transform,
    mechanism_class,
    transform_class,
)
from securefg.protocol.releases import DeclaredRelease, parse_releases
from securefg.toml_files import protocols_dir, read_named_toml, top_level_problems

_BINDING_KEYS = {"mechanism", "params", "transforms", "wire_dtype", "unsafe"}
WIRE_DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
"""Precisions a binding's ``wire_dtype`` may ask for floating tensors to travel in."""
_TOP_KEYS = {"name", "description", "tags", "unsafe", "releases"}


@dataclass(frozen=True)
class TransformSpec:
    name: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Binding:
    """One ``[tags."pattern"]`` table."""

    pattern: str
    mechanism: str
    params: Mapping[str, Any] = field(default_factory=dict)
    transforms: tuple[TransformSpec, ...] = ()
    wire_dtype: str | None = None
    """Floating tensors of a tensor exchange travel in this precision (``None``: as they are)."""
    unsafe: str | None = None
    """Why this binding may void a protection (``None``: every voided protection is refused)."""

    @property
    def specificity(self) -> tuple[int, int]:
        exact = not any(c in self.pattern for c in "*?[")
        literal = sum(1 for c in self.pattern if c not in "*?[]")
        return (int(exact), literal)

    def matches(self, tag: str) -> bool:
        return fnmatch.fnmatchcase(tag, self.pattern)


@dataclass(frozen=True)
class Resolved:
    """The mechanism instance and transforms for one tag."""

    binding: Binding
    mechanism: Mechanism
    transforms: tuple[Transform, ...]


class ProtocolStack:
    """A validated mapping from message tags to mechanisms.

    Args:
        name (str): Stack name, reported in every result.
        bindings (Iterable[Binding]): The tag bindings.
        description (str): What the stack protects. (default: ``""``)
        source (str): Where it was read from (for error messages). (default: ``"<memory>"``)
        unsafe (str, optional): Why any binding may void a protection; without it (or the
            binding's own ``unsafe``) a voided protection is refused. (default: :obj:`None`)
        releases (Iterable[DeclaredRelease]): What the stack releases by design, with the attacks
            that measure it and its DP knob (:mod:`securefg.protocol.releases`). (default: none)

    Raises:
        ConfigError: Every invalid binding and every voided protection nobody marked ``unsafe``.
    """

    def __init__(
        self,
        name: str,
        bindings: Iterable[Binding],
        *,
        description: str = "",
        source: str = "<memory>",
        unsafe: str | None = None,
        releases: Iterable[DeclaredRelease] = (),
    ) -> None:
        self.name = name
        self.releases: tuple[DeclaredRelease, ...] = tuple(releases)
        self.description = description
        self.source = source
        self.unsafe = unsafe
        self.bindings = tuple(sorted(bindings, key=lambda b: b.specificity, reverse=True))
        self._cache: dict[str, Resolved] = {}
        problems: list[str] = unsafe_problem("", unsafe)
        failed: list[FailedProtection] = []
        for b in self.bindings:
            invalid = _validate_binding(b)
            problems.extend(invalid)
            if not invalid:
                refused, waived = _check_guarantees(b, stack_unsafe=unsafe)
                problems.extend(refused)
                failed.extend(waived)
        self.failed_protections: tuple[FailedProtection, ...] = tuple(failed)
        """Protections this stack voids and waives with ``unsafe``, in binding order."""
        if problems:
            raise ConfigError(
                f"invalid protocol stack {source}:\n" + "\n".join(f"- {p}" for p in problems)
            )

    # ----------------------------------------------------------------------------- loading
    @classmethod
    def load(cls, path_or_name: str | os.PathLike[str]) -> ProtocolStack:
        """Read a stack from a TOML file, or by name from :func:`protocols_dir`."""
        data, path = read_named_toml(path_or_name, protocols_dir(), "protocol stack")
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<memory>") -> ProtocolStack:
        problems = top_level_problems(data, _TOP_KEYS)
        problems += unsafe_problem("", data.get("unsafe"))
        releases = parse_releases(data.get("releases"), problems)
        name = data.get("name")
        tags = data.get("tags", {})
        if not isinstance(tags, Mapping) or not tags:
            problems.append("missing [tags] table: bind at least one tag pattern")
            tags = {}
        bindings: list[Binding] = []
        for pattern, table in tags.items():
            if not isinstance(table, Mapping):
                problems.append(f"tags.{pattern!r} must be a table")
                continue
            for k in sorted(set(table) - _BINDING_KEYS):
                problems.append(f"tags.{pattern!r}: unknown key {k!r} (known: {sorted(_BINDING_KEYS)})")
            mech = table.get("mechanism")
            if not isinstance(mech, str):
                problems.append(f"tags.{pattern!r}: missing 'mechanism'")
                continue
            params = table.get("params", {})
            if not isinstance(params, Mapping):
                problems.append(f"tags.{pattern!r}: 'params' must be a table")
                params = {}
            specs: list[TransformSpec] = []
            for i, t in enumerate(table.get("transforms", [])):
                if not isinstance(t, Mapping) or not isinstance(t.get("name"), str):
                    problems.append(f"tags.{pattern!r}: transforms[{i}] needs a 'name'")
                    continue
                specs.append(TransformSpec(t["name"], {k: v for k, v in t.items() if k != "name"}))
            wire = table.get("wire_dtype")
            if wire is not None and (not isinstance(wire, str) or wire not in WIRE_DTYPES):
                problems.append(f"tags.{pattern!r}: 'wire_dtype' must be one of {sorted(WIRE_DTYPES)}, got {wire!r}")
                wire = None
            problems += unsafe_problem(f"tags.{pattern!r}: ", table.get("unsafe"))
            bindings.append(Binding(pattern, mech, dict(params), tuple(specs), wire, table.get("unsafe")))
        if problems:
            raise ConfigError(f"invalid protocol stack {source}:\n" + "\n".join(f"- {p}" for p in problems))
        return cls(str(name), bindings, description=str(data.get("description", "")), source=source,
                   unsafe=data.get("unsafe"), releases=releases)

    def releases_for(self, attack: str) -> tuple[DeclaredRelease, ...]:
        """The declared releases an attack measures (empty: a leak the stack does not declare)."""
        return tuple(r for r in self.releases if r.covers(attack))

    # --------------------------------------------------------------------------- resolving
    def binding_for(self, tag: str) -> Binding:
        for b in self.bindings:
            if b.matches(tag):
                return b
        raise UnboundTagError(
            f"message tag {tag!r} is not bound by protocol stack {self.name!r} ({self.source}); "
            f"add a [tags.{tag!r}] table (patterns present: {[b.pattern for b in self.bindings]})"
        )

    def resolve(self, tag: str, kind: ExchangeKind) -> Resolved:
        """The mechanism (and transforms) carrying ``tag`` for an exchange of ``kind``."""
        if tag not in self._cache:
            b = self.binding_for(tag)
            mech = mechanism_class(b.mechanism)(**b.params)
            transforms = tuple(transform_class(t.name)(**t.params) for t in b.transforms)
            self._cache[tag] = Resolved(b, mech, transforms)
        res = self._cache[tag]
        if kind not in res.mechanism.exchanges:
            raise ConfigError(
                f"tag {tag!r} is a {kind.value!r} exchange, but stack {self.name!r} binds it to "
                f"{res.binding.mechanism!r}, which carries only "
                f"{sorted(k.value for k in res.mechanism.exchanges)}"
            )
        return res

    def check_tags(self, tags: Mapping[str, ExchangeKind]) -> None:
        """Validate that every tag a method emits is bound to a mechanism for its kind."""
        problems = []
        for tag, kind in tags.items():
            try:
                self.resolve(tag, kind)
            except (UnboundTagError, ConfigError) as exc:
                problems.append(str(exc))
        if problems:
            raise ConfigError(
                f"protocol stack {self.name!r} cannot carry this method:\n"
                + "\n".join(f"- {p}" for p in problems)
            )

    def helper_parties(self) -> tuple[str, ...]:
        """Parties besides the server and the clients that its mechanisms need (``ckks_robust``:
        a ``keyholder``, so that no client judges the updates), in binding order."""
        needed: dict[str, None] = {}
        for b in self.bindings:
            for pid in getattr(mechanism_class(b.mechanism), "needs_parties", ()):
                needed[pid] = None
        return tuple(needed)

    def describe(self) -> dict[str, Any]:
        """The stack as plain data: :meth:`content` plus where it was read from."""
        return {"source": self.source, **self.content()}

    def content(self) -> dict[str, Any]:
        """What the stack says, independent of where it was read from (hashed by
        :mod:`securefg.protocol.stack_identity`); ``from_dict`` of it, with ``bindings`` as
        ``tags``, rebuilds the same stack."""
        return {
            "name": self.name,
            "description": self.description,
            **({"unsafe": self.unsafe} if self.unsafe is not None else {}),
            **({"releases": [r.to_dict() for r in self.releases]} if self.releases else {}),
            "bindings": {
                b.pattern: {
                    "mechanism": b.mechanism,
                    "params": dict(b.params),
                    "transforms": [{"name": t.name, **t.params} for t in b.transforms],
                    **({"wire_dtype": b.wire_dtype} if b.wire_dtype else {}),
                    **({"unsafe": b.unsafe} if b.unsafe is not None else {}),
                }
                for b in self.bindings
            },
        }

    def __repr__(self) -> str:
        return f"ProtocolStack({self.name!r})"


def _check_guarantees(b: Binding, *, stack_unsafe: str | None) -> tuple[list[str], list[FailedProtection]]:
    """``(refusals, waived)`` for the protections a valid binding's settings void."""
    where = f"tags.{b.pattern!r}: "
    voided = list(mechanism_class(b.mechanism).voided_guarantees(b.params))
    for t in b.transforms:
        voided += transform_class(t.name).voided_guarantees(t.params)
    reason = b.unsafe if b.unsafe is not None else stack_unsafe
    if reason is None:
        return [refusal(where, v) for v in voided], []
    return [], [FailedProtection(v.protection, b.pattern, v.detail, reason) for v in voided]


def _validate_binding(b: Binding) -> list[str]:
    where = f"tags.{b.pattern!r}"
    try:
        mcls = mechanism_class(b.mechanism)
    except ConfigError as exc:
        return [f"{where}: {exc}"]
    problems = [f"{where}: {p}" for p in mcls.validate_params(b.params)]
    for t in b.transforms:
        try:
            tcls = transform_class(t.name)
        except ConfigError as exc:
            problems.append(f"{where}: {exc}")
            continue
        unknown = set(t.params) - set(tcls.defaults)
        if unknown:
            problems.append(
                f"{where}: unknown parameter(s) {sorted(unknown)} for transform {t.name!r} "
                f"(known: {sorted(tcls.defaults)})"
            )
        if getattr(tcls, "needs_individual_inputs", False) and not getattr(
            mcls, "reveals_individual_inputs", False
        ):
            problems.append(
                f"{where}: transform {t.name!r} needs to see individual inputs, which "
                f"mechanism {b.mechanism!r} hides (e.g. robust aggregation over a masked sum "
                "is impossible); use norm bounding on the client side instead"
            )
    return problems

"""Fuzz protocol stack files (securefg/protocol/stack.py, toml_files.py): TOML text to a stack.

Strategies: arbitrary text and arbitrary bytes (invalid UTF-8 included) as a stack file; the
shipped stacks under ``protocols/`` mutated as text (bytes flipped, truncated, spliced) and as
documents (a value anywhere replaced by any TOML value: huge and negative integers, ``nan``,
``inf``, strings, dates, arrays, tables; keys deleted or added); documents binding one tag to any
registered mechanism with any of its parameters set to any TOML value, with transforms likewise.
Properties: loading either gives a stack or raises ``ConfigError`` naming the file; a stack that
loads can resolve every tag it binds for every exchange its mechanism carries, or raises
``ConfigError`` (never a bare ``TypeError``/``ValueError``/``KeyError``); a loaded stack's
:meth:`~ProtocolStack.content` rebuilds the same stack.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import tomllib
from hypothesis import example, given
from hypothesis import strategies as st

from securefg.errors import ConfigError
from securefg.protocol.mechanism import (
    _MECHANISMS,
    _TRANSFORMS,
    _load_builtins,
    mechanism_class,
    transform_class,
)
from securefg.protocol.stack import ProtocolStack, protocols_dir

from .strategies import FUZZ, KnownCrash, mutated, parse_or_typed

_load_builtins()  # fills the registries

SHIPPED = sorted(protocols_dir().glob("*.toml"))
SHIPPED_TEXT = {p.name: p.read_bytes() for p in SHIPPED}
SHIPPED_DOCS = {p.name: tomllib.loads(p.read_text(encoding="utf-8")) for p in SHIPPED}
MECHANISMS = sorted(_MECHANISMS)
TRANSFORMS = sorted(_TRANSFORMS)

#: Any TOML value (what ``tomllib`` can hand a validator): 64-bit integers, floats with nan/inf,
#: strings, dates and times, arrays and tables, nested.
toml_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2, 64, 65, 2**31, 2**63 - 1, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, math.inf, -math.inf, math.nan, 0.5, 1.0, 1.5]),
    st.text(max_size=12),
    st.sampled_from(["", "auto", "error", "clip", "none", "flood", "round", "pow2", "central", "local",
                     "default", "deep", "median", "secure_sum", "plaintext", "aes128-ctr", "cosine"]),
    st.dates(), st.datetimes(), st.times(),
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


#: Crashes this suite found are fixed; each keeps a regression test below.
KNOWN: tuple[KnownCrash, ...] = ()


def _load_text(raw: bytes) -> ProtocolStack:
    """Write ``raw`` to a stack file and load it as a user would (``ProtocolStack.load(path)``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stack.toml"
        path.write_bytes(raw)
        return ProtocolStack.load(path)


def _exercise(stack: ProtocolStack) -> None:
    """What a run does with a loaded stack: resolve every bound tag for every exchange its
    mechanism carries (builds the mechanism and transforms), and rebuild it from its content."""
    for b in stack.bindings:
        tag = b.pattern.replace("*", "x").replace("?", "x")
        for kind in sorted(mechanism_class(b.mechanism).exchanges):
            try:
                stack.resolve(tag, kind)
            except ConfigError:
                pass
    content = stack.content()
    rebuilt = ProtocolStack.from_dict({**{k: v for k, v in content.items() if k != "bindings"},
                                       "tags": content["bindings"]}, source="<rebuilt>")
    assert rebuilt.content() == content


def _load_and_exercise(raw: bytes) -> None:
    stack = _load_text(raw)
    _exercise(stack)


@FUZZ
@given(st.sampled_from(sorted(SHIPPED_TEXT)))
def test_every_shipped_stack_loads_resolves_and_rebuilds(name):
    _load_and_exercise(SHIPPED_TEXT[name])


_WORDS = ["name", "description", "unsafe", "tags", "mechanism", "params", "transforms", "wire_dtype", *MECHANISMS,
          *TRANSFORMS, *{k for m in MECHANISMS for k in mechanism_class(m).defaults},
          *{k for t in TRANSFORMS for k in transform_class(t).defaults}]
_toml_literals = st.one_of(
    st.sampled_from(["true", "false", "nan", "inf", "-inf", "0", "-1", "1e309", "9223372036854775807",
                     "9223372036854775808", "0x7fffffffffffffff", "1979-05-27", "[]", "{}", "[1, 2]", '""', "'x'",
                     '"\\u0000"', "0.5", "1.0"]),
    st.sampled_from(_WORDS).map(lambda w: f'"{w}"'),
)


@st.composite
def toml_ish_text(draw: st.DrawFn) -> str:
    """Lines a stack file is made of: table headers, ``key = value`` lines, inline tables, junk."""
    lines = ['name = "fuzz"'] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(("table", "kv", "kv", "kv", "inline", "junk")))
        key = draw(st.sampled_from(_WORDS))
        if kind == "table":
            lines.append(f'[tags."{draw(st.sampled_from(["t", "*", "a/*", key]))}"]')
        elif kind == "kv":
            lines.append(f"{key} = {draw(_toml_literals)}")
        elif kind == "inline":
            inner = ", ".join(f"{draw(st.sampled_from(_WORDS))} = {draw(_toml_literals)}"
                              for _ in range(draw(st.integers(0, 3))))
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(draw(st.text(max_size=20)))
    return "\n".join(lines) + "\n"


@FUZZ
@given(st.text(max_size=300) | toml_ish_text())
@example('name = "x"\n[tags."t"]\nmechanism = "plaintext"\nparams = 5\n')
@example('name = "x"\ntags = []\n')
@example('name = "x"\n[tags."t"]\nmechanism = ["ckks"]\n')
def test_arbitrary_text_as_a_stack_file_loads_or_raises_config_error(text):
    parse_or_typed(_load_and_exercise, text.encode("utf-8"), errors=ConfigError, known=KNOWN)


@FUZZ
@given(st.binary(max_size=200))
@example(b'name = "\xff"\n')  # issue 38: invalid UTF-8 ended in a raw UnicodeDecodeError
@example(b"\xef\xbb\xbfname = 'x'\n")  # a UTF-8 byte-order mark
def test_arbitrary_bytes_as_a_stack_file_load_or_raise_config_error(raw):
    parse_or_typed(_load_and_exercise, raw, errors=ConfigError, known=KNOWN)


@FUZZ
@given(st.sampled_from(sorted(SHIPPED_TEXT)).flatmap(lambda name: mutated(SHIPPED_TEXT[name], max_edits=3)))
def test_byte_mutations_of_the_shipped_stacks_load_or_raise_config_error(raw):
    parse_or_typed(_load_and_exercise, raw, errors=ConfigError, known=KNOWN)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into a parsed TOML document (tables and arrays)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A shipped stack with 1..3 values replaced, keys deleted or keys added."""
    doc = copy.deepcopy(SHIPPED_DOCS[draw(st.sampled_from(sorted(SHIPPED_DOCS)))])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)[1:]))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        op = draw(st.sampled_from(("replace", "replace", "delete", "add")))
        if op == "replace":
            parent[path[-1]] = draw(toml_values)
        elif op == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(toml_values)
        else:
            parent.append(draw(toml_values))
        if not _paths(doc)[1:]:
            break
    return doc


def _dumps(doc: dict[str, Any]) -> bytes | None:
    try:
        return tomli_w.dumps(doc).encode("utf-8")
    except (TypeError, ValueError):  # e.g. a mixed array tomli_w refuses; the document then cannot exist
        return None


@FUZZ
@given(mutated_documents())
def test_value_mutations_of_the_shipped_stacks_load_or_raise_config_error(doc):
    raw = _dumps(doc)
    if raw is not None:
        parse_or_typed(_load_and_exercise, raw, errors=ConfigError, known=KNOWN)


@st.composite
def one_binding_documents(draw: st.DrawFn) -> dict[str, Any]:
    """One tag bound to any mechanism, each known parameter (and sometimes an unknown one) set to
    any TOML value, plus 0..2 transforms with any parameters."""
    mech = draw(st.sampled_from(MECHANISMS))
    known = sorted(mechanism_class(mech).defaults)
    params = {k: draw(toml_values) for k in draw(st.lists(st.sampled_from(known), unique=True, max_size=4))} \
        if known else {}
    if draw(st.booleans()):
        params[draw(st.text(max_size=8))] = draw(toml_values)
    transforms = []
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(TRANSFORMS))
        tparams = sorted(transform_class(name).defaults)
        transforms.append({"name": name, **{k: draw(toml_values) for k in draw(
            st.lists(st.sampled_from(tparams), unique=True, max_size=3))}})
    binding: dict[str, Any] = {"mechanism": mech, "params": params}
    if transforms:
        binding["transforms"] = transforms
    if draw(st.booleans()):
        binding["wire_dtype"] = draw(st.sampled_from(["float32", "bfloat16"]) | toml_values)
    doc: dict[str, Any] = {"name": "fuzz", "tags": {draw(st.sampled_from(["t", "t/*", "*"])): binding}}
    if draw(st.booleans()):
        doc["unsafe"] = draw(st.sampled_from(["fuzzing"]) | toml_values)
    return doc


@FUZZ
@given(one_binding_documents())
def test_any_parameter_values_load_and_resolve_or_raise_config_error(doc):
    raw = _dumps(doc)
    if raw is not None:
        parse_or_typed(_load_and_exercise, raw, errors=ConfigError, known=KNOWN)


@FUZZ
@given(one_binding_documents())
def test_from_dict_and_load_agree(doc):
    raw = _dumps(doc)
    if raw is None:
        return
    via_file = parse_or_typed(_load_text, raw, errors=ConfigError, known=KNOWN)
    via_dict = parse_or_typed(ProtocolStack.from_dict, tomllib.loads(raw.decode()), errors=ConfigError, known=KNOWN)
    assert (via_file is None) == (via_dict is None)
    if via_file is not None:
        assert via_file.content() == via_dict.content()


def test_shipped_stacks_are_found():
    assert len(SHIPPED) >= 10 and os.path.isdir(protocols_dir())


# ------------------------------------------------------------- crashes this suite found (regressions)
def _stack(binding: dict[str, Any]) -> bytes:
    return tomli_w.dumps({"name": "fuzz", "tags": {"t": binding}}).encode()


# found by this suite: a bare TypeError (unhashable type) before the fix
@pytest.mark.parametrize("wire", [[], {}])
def test_an_unhashable_wire_dtype_is_a_config_error(wire):
    with pytest.raises(ConfigError, match="wire_dtype"):
        _load_text(_stack({"mechanism": "plaintext", "wire_dtype": wire}))


# found by this suite: a bare TypeError (unhashable type) before the fix
@pytest.mark.parametrize("mechanism", ["secure_sum", "blind_sum"])
def test_an_unhashable_secure_sum_prg_is_a_config_error(mechanism):
    with pytest.raises(ConfigError, match="prg"):
        _load_text(_stack({"mechanism": mechanism, "params": {"prg": []}}))


@pytest.mark.parametrize("preset", [[], {}, 5, ["default"]])
def test_a_ckks_preset_that_is_not_a_name_is_a_config_error(preset):
    # found by the fuzz suite: `name not in PRESETS` raised a bare TypeError for an array or table
    with pytest.raises(ConfigError, match="Could not resolve CKKS preset"):
        _load_text(_stack({"mechanism": "ckks", "params": {"preset": preset}}))

"""``securefg run --list-options METHOD``: every ``--option KEY=VALUE`` a run accepts, with defaults.

A run reads its options in three places: the method (``Method.option_defaults``, documented in
the ``Options:`` section of the method's docstring), the run itself (``patience``, the robust
aggregation of :mod:`securefg.protocol.robust.options`) and, on graph datasets, the data and the
backbone (:data:`securefg.experiment_data.DATA_OPTIONS`). This lists all three, so the error for
an unknown key and the help agree with what a run accepts.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from securefg.methods.base import Method

#: What the run-level and graph-data options do (their code documents them at length).
RUN_OPTION_HELP: dict[str, str] = {
    "patience": "stop after N rounds without a better validation score that the server learned; 0 runs every round",
    "robust": "closest|median|trimmed|norm: sum public subgroups of >= robust_k clients securely, then apply the "
              "rule to the subgroup means; krum: CKKS-encrypt each update, a keyholder party runs multi-Krum on "
              "their inner products, the server sums the kept ones (docs/robust.md); empty = off",
    "robust_k": "clients per subgroup of the robust aggregation (not with krum)",
    "robust_trim": "fraction trimmed at each end by robust=trimmed; share of clients robust=krum drops",
    "robust_norm": "norm bound factor of robust=norm (and of krum when given: scale to the median norm times it)",
}
DATA_OPTION_HELP: dict[str, tuple[Any, str]] = {
    "features": ("original", ("graph node features: original (TU node labels; one-hot degree for IMDB) or degree "
                              "(capped one-hot degree; the default when the datasets' widths differ)")),
    "pooling": ("sum", "GIN readout: sum or mean"),
    "heads": ("dataset", "several datasets: one classifier head per dataset (dataset) or one softmax (shared)"),
    "head_average": ("owners", "per-dataset heads: average each over the clients that trained it (owners) or all"),
    "alpha": (0.5, "Dirichlet concentration of --partition dirichlet"),
}

_ENTRY = re.compile(r"^(?P<names>[a-z_][a-z0-9_]*(?:, [a-z_][a-z0-9_]*)*) \((?P<type>[^)]*)\): ?(?P<text>.*)$")


def docstring_entries(doc: str | None) -> dict[str, str]:
    """``name (type): text`` entries of a Google-style docstring, continuation lines joined."""
    found: dict[str, str] = {}
    names: list[str] = []
    indent = -1
    for line in inspect.cleandoc(doc or "").splitlines():
        text, depth = line.strip(), len(line) - len(line.lstrip())
        match = _ENTRY.match(text)
        if match and (indent < 0 or depth <= indent):
            names, indent = match["names"].split(", "), depth
            for n in names:
                found.setdefault(n, match["text"])
        elif names and text and depth > indent:
            for n in names:
                found[n] = f"{found[n]} {text}"
        else:
            names, indent = [], -1
    return found


def _documenting_classes(mcls: type[Method]) -> Iterator[type]:
    """The classes defined in the method's package (and its models' package), when it has one."""
    package = mcls.__module__.rsplit(".", 1)[0]
    roots = (package, package.replace(".methods.", ".models."))
    for mod_name, module in list(sys.modules.items()):
        if module is not None and mod_name.startswith(roots) and package != "securefg.methods":
            for obj in vars(module).values():
                if inspect.isclass(obj) and obj.__module__ == mod_name:
                    yield obj


def option_docs(mcls: type[Method]) -> dict[str, str]:
    """Each of ``mcls.option_defaults``' keys with its description: from the method's own classes
    first, then from the package class that documents the most of its options (a settings record)."""
    keys = set(mcls.option_defaults)
    own = [docstring_entries(c.__doc__) for c in mcls.__mro__]
    others = [docstring_entries(c.__doc__) for c in _documenting_classes(mcls) if c not in mcls.__mro__]
    docs: dict[str, str] = {}
    for entries in [*own, *sorted(others, key=lambda e: -len(keys & set(e)))]:
        for name, text in entries.items():
            docs.setdefault(name, text)
    from securefg.methods.backbone_option import SAMPLING_OPTION_HELP

    for name, text in SAMPLING_OPTION_HELP.items():
        docs.setdefault(name, text)
    return {k: _plain(docs[k]) for k in mcls.option_defaults if k in docs}


def _plain(text: str) -> str:
    """Docstring markup as terminal text: ````x```` -> ``x``, the trailing default dropped."""
    text = re.sub(r"\s*\(default[^()]*(\([^()]*\)[^()]*)*\)\s*\.?\s*$", "", text)
    return re.sub(r"``([^`]*)``", r"\1", re.sub(r":(mod|class|func|data|obj):`~?([^`]*)`", r"\2", text)).strip()


def accepted_options(method: str) -> dict[str, Any]:
    """Every key ``--option`` accepts for ``method``, with its default."""
    from securefg.experiment_data import DATA_OPTIONS
    from securefg.methods.base import method_class
    from securefg.protocol.robust.options import ROBUST_OPTIONS

    mcls = method_class(method)
    out: dict[str, Any] = dict(mcls.option_defaults)
    out["patience"] = mcls.default_patience
    if getattr(mcls, "ROBUST_TAGS", ()):
        out.update(ROBUST_OPTIONS)
    if "graph" in mcls.tasks:
        out.update({k: DATA_OPTION_HELP[k][0] for k in DATA_OPTIONS})
    return out


def render_options(method: str) -> str:
    """The text of ``securefg run --list-options METHOD``."""
    from securefg.experiment_data import DATA_OPTIONS
    from securefg.methods.base import method_class
    from securefg.methods.method_card import method_card

    card, mcls = method_card(method), method_class(method)
    docs = option_docs(mcls)
    accepted = accepted_options(method)

    def block(title: str, keys: list[str], text: dict[str, str]) -> list[str]:
        if not keys:
            return []
        lines = [title]
        for k in keys:
            default = accepted[k]
            shown = '""' if default == "" else str(default).lower() if isinstance(default, bool) else str(default)
            lines.append(f"  {k}={shown}")
            lines.append(f"      {text.get(k) or f'(no description in the code; see {card.docs})'}")
        return [*lines, ""]

    method_keys = list(mcls.option_defaults)
    run_keys = [k for k in RUN_OPTION_HELP if k in accepted and k not in method_keys]
    data_keys = [k for k in DATA_OPTIONS if k in accepted and k not in method_keys]
    head = (f"--option KEY=VALUE for --method {card.name} ({card.label}: {card.paper}); defaults after '='. "
            f"More in {card.docs}.\n")
    return "\n".join([
        head,
        *block(f"{card.label} options:", method_keys, docs),
        *block("run options (--option patience=N is also how early stopping is set):", run_keys, RUN_OPTION_HELP),
        *block("graph-dataset options:", data_keys, {k: v[1] for k, v in DATA_OPTION_HELP.items()}),
    ]).rstrip()


__all__ = ["DATA_OPTION_HELP", "RUN_OPTION_HELP", "accepted_options", "docstring_entries", "option_docs",
           "render_options"]

"""``--option robust=median|trimmed|norm|closest|krum|norm_filter`` (and ``robust_k``, ...): a stack with robust update sums.

The options are the stack's, not the method's: they rebind each tag the method declares in
``ROBUST_TAGS`` (its model-update aggregate). ``median``, ``trimmed``, ``norm`` and ``closest``
bind it to ``subgroup_robust``, keeping the tag's own mechanism, parameters and transforms as the
per-subgroup sum; the derived stack is named ``<stack>+robust-<rule>-k<k>``. ``krum`` and
``norm_filter`` let a key holder judge every input on the inner products of its CKKS-encrypted
sketch (multi-Krum, ``robust_trim``; or the norm filter, which drops an input above
``robust_norm`` times the median norm, default 3), keeping the tag's transforms: a tag summed by
``secure_sum`` goes to ``masked_robust`` (the kept inputs are then summed by SecAgg+ with the
tag's own parameters), one summed by ``blind_sum`` to ``blind_robust`` (the same, through the blind
sum: the server still never reads it), a ``plaintext`` tag to ``plaintext_krum`` (the same rule run
by the server on the clear uploads: an audit's unprotected comparison), any other (and multi-Krum
with ``robust_norm``, a norm bound that scales) to ``ckks_robust`` (the inputs themselves
CKKS-encrypted). The stack is named ``<stack>+robust-krum`` or ``<stack>+robust-normfilter<F>``.
Every report says which stack ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from securefg.errors import ConfigError
from securefg.protocol.mechanism import mechanism_class
from securefg.protocol.robust.blind_robust import NAME as BLIND_ROBUST
from securefg.protocol.robust.ckks_robust import NAME as CKKS_ROBUST
from securefg.protocol.robust.masked_robust import NAME as MASKED_ROBUST
from securefg.protocol.robust.mechanism import NAME
from securefg.protocol.robust.plaintext_krum import NAME as PLAINTEXT_KRUM
from securefg.protocol.robust.rules import RULES
from securefg.protocol.secure_sum.settings import DEFAULTS as SECURE_SUM_DEFAULTS
from securefg.protocol.stack import ProtocolStack

BLIND = "blind_sum"
"""Server-blind shared sums: under the robust option their subgroups are summed by secure_sum."""

#: Rules a key holder judges on encrypted sketches (every client's input, not subgroups).
JUDGED_RULES = ("krum", "norm_filter")
#: The norm filter's threshold unless ``robust_norm`` sets it: an input above 3x the median norm
#: is dropped (a sign flip x10 or a model replacement is far above; honest inputs of one dataset
#: stay within it).
NORM_FILTER_FACTOR = 3.0

#: Options this module consumes, with their defaults (``robust = ""``: off).
ROBUST_OPTIONS: Mapping[str, Any] = {"robust": "", "robust_k": 3, "robust_trim": 0.2, "robust_norm": 1.0}


def split_robust_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(robust options, the rest)``."""
    return ({k: v for k, v in options.items() if k in ROBUST_OPTIONS},
            {k: v for k, v in options.items() if k not in ROBUST_OPTIONS})


def kept_releases(stack: ProtocolStack, server_reads: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``releases`` entry of a derived stack: the base stack's declared releases, with the
    server added to the receivers of ``server_reads`` (blind tags the robust rule makes it read)."""
    out = []
    for r in stack.releases:
        d = r.to_dict()
        if r.tag in server_reads and "server" not in d["to"]:
            d["to"] = [*d["to"], "server"]
        out.append(d)
    return {"releases": out} if out else {}


def robust_stack(stack: ProtocolStack, tags: tuple[str, ...], *, rule: str, k: int, trim: float = 0.2,
                 norm_factor: float = 1.0) -> ProtocolStack:
    """``stack`` with each of ``tags`` carried by ``subgroup_robust`` over its current mechanism.

    A tag already bound to ``subgroup_robust`` or to another robust statistic (a mechanism that
    does not return a sum, e.g. ``plaintext_trimmed_mean``) is left as it is.
    """
    desc = stack.describe()
    bindings = {p: dict(b) for p, b in desc["bindings"].items()}
    changed = False
    unblinded: list[str] = []
    for tag in tags:
        b = stack.binding_for(tag)
        if b.mechanism == NAME or not mechanism_class(b.mechanism).returns_sum:
            continue
        # a server-blind sum cannot feed a rule the server runs: its subgroups are summed by
        # secure_sum (same ring parameters), and the server then reads them (stated below)
        inner = "secure_sum" if b.mechanism == BLIND else b.mechanism
        if b.mechanism == BLIND:
            unblinded.append(tag)
        bindings[tag] = {"mechanism": NAME,
                         "params": {"inner": inner, "inner_params": dict(b.params), "rule": rule, "k": k,
                                    "trim": trim, "norm_factor": norm_factor},
                         "transforms": [{"name": t.name, **t.params} for t in b.transforms],
                         **({"unsafe": b.unsafe} if b.unsafe is not None else {})}  # the inner sum's waivers
        changed = True
    if not changed:
        return stack
    name = f"{stack.name}+robust-{rule}-k{k}"
    desc_text = (f"{stack.description.strip()}\n\nRobust option: {list(tags)} summed per public subgroup of >= {k} "
                 f"clients and combined by {rule!r} (subgroup_robust); the server learns each subgroup's sum "
                 "(also for tags that were server-blind: the rule runs at the server).")
    unsafe = {"unsafe": stack.unsafe} if stack.unsafe is not None else {}
    return ProtocolStack.from_dict({"name": name, "description": desc_text, "tags": bindings, **unsafe,
                                    **kept_releases(stack, tuple(unblinded))},
                                   source=f"{stack.source} + --option robust={rule}")


def krum_stack(stack: ProtocolStack, tags: tuple[str, ...], *, trim: float = 0.2,
               norm_factor: float = 0.0, rule: str = "krum") -> ProtocolStack:
    """``stack`` with each of ``tags`` judged at a key holder on the inner products of its
    encrypted sketches: multi-Krum (``rule="krum"``; with ``norm_factor`` also a norm bound that
    scales) or the norm filter (``rule="norm_filter"``: drop an input above ``norm_factor`` times
    the median norm). A masked sum keeps its protection: ``secure_sum`` goes to ``masked_robust``,
    ``blind_sum`` to ``blind_robust`` (the server still never reads the sum), as long as the rule
    keeps or drops; a scaling bound or any other mechanism goes to ``ckks_robust``."""
    desc = stack.describe()
    bindings = {p: dict(b) for p, b in desc["bindings"].items()}
    tags = tuple(t for t in tags if mechanism_class(stack.binding_for(t).mechanism).returns_sum)  # robust already
    if not tags:
        return stack
    selecting = rule == "norm_filter" or norm_factor == 0
    rule_params = {"rule": rule, "trim": trim, **({"norm_factor": norm_factor} if rule == "norm_filter" else {})}
    what = (f"multi-Krum, trim {trim}" if rule == "krum" else
            f"the norm filter: an input above {norm_factor:g} times the median norm is dropped")
    masked, blind, encrypted, clear = [], [], [], []
    for tag in tags:
        b = stack.binding_for(tag)
        transforms = [{"name": t.name, **t.params} for t in b.transforms]
        unsafe = {"unsafe": b.unsafe} if b.unsafe is not None else {}
        if b.mechanism == "plaintext" and selecting:  # the same rule, nothing to hide
            bindings[tag] = {"mechanism": PLAINTEXT_KRUM, "params": dict(rule_params), "transforms": transforms}
            clear.append(tag)
        elif b.mechanism in ("secure_sum", BLIND) and selecting:
            inner = {k: v for k, v in b.params.items() if k in SECURE_SUM_DEFAULTS}
            name = BLIND_ROBUST if b.mechanism == BLIND else MASKED_ROBUST
            bindings[tag] = {"mechanism": name, "params": {**rule_params, "inner_params": inner},
                             "transforms": transforms, **unsafe}
            (blind if b.mechanism == BLIND else masked).append(tag)
        else:
            bindings[tag] = {"mechanism": CKKS_ROBUST, "params": {"rule": rule, "trim": trim, "norm_factor": norm_factor},
                             "transforms": transforms}
            encrypted.append(tag)
    parts = []
    if masked or blind:
        parts.append(f"{masked + blind} send CKKS-encrypted count sketches; a 'keyholder' party decrypts only their "
                     f"pairwise inner products and drops the inputs {what} flags; the kept clients' inputs are "
                     "summed by SecAgg+ (masked_robust), and a dropped client's input never leaves it")
    if blind:
        parts.append(f"{blind} stay server-blind: the kept inputs go through blind_sum and every client checks the "
                     "unblinded sum against the key holder's sketch sum, sealed to it (blind_robust)")
    if clear:
        parts.append(f"{clear} judged in the clear by the server (plaintext_krum: {what}, on the uploads' count "
                     "sketches, the rule the protected stacks run at their key holder)")
    if encrypted:
        parts.append(f"{encrypted} CKKS-encrypted with their sketches; the key holder judges the sketches' inner "
                     f"products ({what}) and the server sums the kept ciphertexts (ckks_robust)")
    desc_text = (f"{stack.description.strip()}\n\nRobust option: " + "; ".join(parts) + ". The server learns "
                 "which clients were dropped and, but for blind_robust tags, the robust result.")
    unsafe = {"unsafe": stack.unsafe} if stack.unsafe is not None else {}
    unblinded = tuple(t for t in encrypted if stack.binding_for(t).mechanism == BLIND)  # ckks_robust reads it
    suffix = "krum" if rule == "krum" else f"normfilter{norm_factor:g}"
    return ProtocolStack.from_dict({"name": f"{stack.name}+robust-{suffix}", "description": desc_text, "tags": bindings,
                                    **unsafe, **kept_releases(stack, unblinded)},
                                   source=f"{stack.source} + --option robust={rule}")


def apply_robust_option(stack: ProtocolStack, method_cls: Any, options: Mapping[str, Any]) -> ProtocolStack:
    """The stack a run uses given its ``--option`` values (``stack`` itself when ``robust`` is off).

    Raises:
        ConfigError: An unknown rule, a bad number, or a method that declares no robust tag.
    """
    robust, _ = split_robust_options(options)
    opts = {**ROBUST_OPTIONS, **robust}
    rule = str(opts["robust"]).strip().lower()
    if rule in ("", "none", "off", "false"):
        extra = sorted(set(robust) - {"robust"})
        if extra:
            raise ConfigError(f"options {extra} need --option robust=<{'|'.join(RULES)}>")
        return stack
    if rule not in (*RULES, *JUDGED_RULES):
        raise ConfigError(f"--option robust must be one of {[*RULES, *JUDGED_RULES]} (or none), got {opts['robust']!r}")
    tags = tuple(getattr(method_cls, "ROBUST_TAGS", ()))
    if not tags:
        raise ConfigError(f"method {method_cls.name!r} has no update aggregate to make robust; --option robust "
                          "applies to fedavg, fedprox, fedsgd, fedstruct and cefgc")
    try:
        k, trim, nf = int(opts["robust_k"]), float(opts["robust_trim"]), float(opts["robust_norm"])
    except (TypeError, ValueError):
        raise ConfigError(f"robust_k must be an integer and robust_trim, robust_norm numbers, got "
                          f"{opts['robust_k']!r}, {opts['robust_trim']!r}, {opts['robust_norm']!r}") from None
    if rule in JUDGED_RULES:
        if "robust_k" in robust:
            raise ConfigError(f"robust_k sets subgroup sizes; --option robust={rule} judges every client's update")
        if rule == "norm_filter":
            factor = nf if "robust_norm" in robust else NORM_FILTER_FACTOR
            if not factor > 0:
                raise ConfigError(f"robust_norm (the norm filter's threshold) must be > 0, got {factor}")
            return krum_stack(stack, tags, trim=trim, norm_factor=factor, rule="norm_filter")
        return krum_stack(stack, tags, trim=trim, norm_factor=nf if "robust_norm" in robust else 0.0)
    return robust_stack(stack, tags, rule=rule, k=k, trim=trim, norm_factor=nf)


__all__ = ["ROBUST_OPTIONS", "apply_robust_option", "krum_stack", "robust_stack", "split_robust_options"]

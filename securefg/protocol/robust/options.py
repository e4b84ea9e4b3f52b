"""``--option robust=median|trimmed|norm|closest|krum`` (and ``robust_k``, ...): a stack with robust update sums.

The options are the stack's, not the method's: they rebind each tag the method declares in
``ROBUST_TAGS`` (its model-update aggregate). ``median``, ``trimmed``, ``norm`` and ``closest``
bind it to ``subgroup_robust``, keeping the tag's own mechanism, parameters and transforms as the
per-subgroup sum; the derived stack is named ``<stack>+robust-<rule>-k<k>``. ``krum`` lets a key
holder run multi-Krum on the inner products of the updates' CKKS-encrypted sketches, keeping the
tag's transforms: a tag summed by ``secure_sum`` or ``blind_sum`` goes to ``masked_robust`` (the
kept updates are then summed by SecAgg+ with the tag's own parameters), a ``plaintext`` tag to
``plaintext_krum`` (the same rule run by the server on the clear uploads: an audit's unprotected
comparison), any other (and any with ``robust_norm``, a norm bound) to ``ckks_robust`` (the
updates themselves CKKS-encrypted). The
stack is named ``<stack>+robust-krum``; a ``shared_sum`` tag's robust result is then read by the
server and sent on to the clients (as under ``subgroup_robust``). Every report says which stack ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from securefg.errors import ConfigError
from securefg.protocol.mechanism import mechanism_class
from securefg.protocol.robust.ckks_robust import NAME as CKKS_ROBUST
from securefg.protocol.robust.masked_robust import NAME as MASKED_ROBUST
from securefg.protocol.robust.mechanism import NAME
from securefg.protocol.robust.plaintext_krum import NAME as PLAINTEXT_KRUM
from securefg.protocol.robust.rules import RULES
from securefg.protocol.secure_sum.settings import DEFAULTS as SECURE_SUM_DEFAULTS
from securefg.protocol.stack import ProtocolStack

BLIND = "blind_sum"
"""Server-blind shared sums: under the robust option their subgroups are summed by secure_sum."""

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
               norm_factor: float = 0.0) -> ProtocolStack:
    """``stack`` with each of ``tags`` judged by multi-Krum at a key holder: ``masked_robust`` for a
    masked sum without a norm bound, ``ckks_robust`` otherwise."""
    desc = stack.describe()
    bindings = {p: dict(b) for p, b in desc["bindings"].items()}
    tags = tuple(t for t in tags if mechanism_class(stack.binding_for(t).mechanism).returns_sum)  # robust already
    if not tags:
        return stack
    masked, encrypted, clear = [], [], []
    for tag in tags:
        b = stack.binding_for(tag)
        transforms = [{"name": t.name, **t.params} for t in b.transforms]
        if b.mechanism == "plaintext" and norm_factor == 0:  # the same rule, nothing to hide
            bindings[tag] = {"mechanism": PLAINTEXT_KRUM, "params": {"trim": trim}, "transforms": transforms}
            clear.append(tag)
        elif b.mechanism in ("secure_sum", BLIND) and norm_factor == 0:
            inner = {k: v for k, v in b.params.items() if k in SECURE_SUM_DEFAULTS}
            bindings[tag] = {"mechanism": MASKED_ROBUST, "params": {"trim": trim, "inner_params": inner},
                             "transforms": transforms, **({"unsafe": b.unsafe} if b.unsafe is not None else {})}
            masked.append(tag)
        else:
            bindings[tag] = {"mechanism": CKKS_ROBUST, "params": {"rule": "krum", "trim": trim, "norm_factor": norm_factor},
                             "transforms": transforms}
            encrypted.append(tag)
    parts = []
    if masked:
        parts.append(f"{masked} send CKKS-encrypted count sketches; a 'keyholder' party decrypts only their pairwise "
                     f"inner products and drops the updates multi-Krum flags (trim {trim}); the kept clients' updates "
                     "are summed by SecAgg+ (masked_robust), and a dropped client's update never leaves it")
    if clear:
        parts.append(f"{clear} judged in the clear by the server (plaintext_krum: multi-Krum, trim {trim}, on the "
                     "uploads' count sketches, the rule the protected stacks run at their key holder)")
    if encrypted:
        parts.append(f"{encrypted} CKKS-encrypted with their sketches; the key holder judges the sketches' inner "
                     f"products (multi-Krum, trim {trim}) and the server sums the kept ciphertexts (ckks_robust)")
    desc_text = (f"{stack.description.strip()}\n\nRobust option: " + "; ".join(parts) + ". The server learns the "
                 "robust mean and which clients were dropped (also for tags that were server-blind: a shared sum's "
                 "robust result is read by the server and sent on to the clients).")
    unsafe = {"unsafe": stack.unsafe} if stack.unsafe is not None else {}
    unblinded = tuple(t for t in tags if stack.binding_for(t).mechanism == BLIND)
    return ProtocolStack.from_dict({"name": f"{stack.name}+robust-krum", "description": desc_text, "tags": bindings,
                                    **unsafe, **kept_releases(stack, unblinded)},
                                   source=f"{stack.source} + --option robust=krum")


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
    if rule not in (*RULES, "krum"):
        raise ConfigError(f"--option robust must be one of {[*RULES, 'krum']} (or none), got {opts['robust']!r}")
    tags = tuple(getattr(method_cls, "ROBUST_TAGS", ()))
    if not tags:
        raise ConfigError(f"method {method_cls.name!r} has no update aggregate to make robust; --option robust "
                          "applies to fedavg, fedprox, fedsgd, fedstruct and cefgc")
    try:
        k, trim, nf = int(opts["robust_k"]), float(opts["robust_trim"]), float(opts["robust_norm"])
    except (TypeError, ValueError):
        raise ConfigError(f"robust_k must be an integer and robust_trim, robust_norm numbers, got "
                          f"{opts['robust_k']!r}, {opts['robust_trim']!r}, {opts['robust_norm']!r}") from None
    if rule == "krum":
        if "robust_k" in robust:
            raise ConfigError("robust_k sets subgroup sizes; --option robust=krum judges every client's update")
        return krum_stack(stack, tags, trim=trim, norm_factor=nf if "robust_norm" in robust else 0.0)
    return robust_stack(stack, tags, rule=rule, k=k, trim=trim, norm_factor=nf)


__all__ = ["ROBUST_OPTIONS", "apply_robust_option", "krum_stack", "robust_stack", "split_robust_options"]

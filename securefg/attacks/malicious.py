"""Malicious variants of a method: the same method with some clients deviating.

An active attack cannot be read from a transcript: the auditor runs the method again with the
adversarial clients' *client half* replaced. :func:`malicious_method` builds a subclass whose
handler wraps the honest one for the adversarial party ids only and registers it under a name
like ``"fedavg+scale"`` (the name is what ``result.json`` reports), so the run goes through the
unchanged experiment pipeline and protocol stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from securefg.methods.base import Method, method_class, register_method


def malicious_method(base: str, label: str, members: Iterable[str], overrides: dict[str, Callable[..., Any]]) -> str:
    """Register ``base`` with ``overrides`` applied for ``members``; return the new method name.

    Args:
        base (str): Registered method name.
        label (str): Suffix naming the behaviour (``"scale"``, ``"spoof"``).
        members (Iterable[str]): Adversarial client ids.
        overrides (dict): ``{handler_name: fn(honest_handler, self, client, *args)}``; ``fn`` runs
            only when ``client.pid`` is adversarial, otherwise the honest handler runs.
    """
    bcls = method_class(base)
    mine = frozenset(members)
    attrs: dict[str, Any] = {"name": f"{bcls.name}+{label}", "__doc__": f"{bcls.__name__} with {sorted(mine)} running {label!r}."}
    for handler, fn in overrides.items():
        honest = getattr(bcls, handler)

        def wrapped(self: Method, client: Any, *args: Any, _h: Any = honest, _fn: Any = fn, **kw: Any) -> Any:
            if client.pid in mine:
                return _fn(_h, self, client, *args, **kw)
            return _h(self, client, *args, **kw)

        attrs[handler] = wrapped
    cls: type[Method] = type(f"{bcls.__name__}Malicious{label.title().replace('_', '')}", (bcls,), attrs)
    register_method(cls)
    return str(cls.name)



def malicious_uploads(base: str, label: str, members: Iterable[str], tag: str,
                      poison: Callable[[dict[str, Any]], dict[str, Any]]) -> str:
    """Register ``base`` with ``members``' inputs to the ``aggregate`` of ``tag`` replaced by
    ``poison(honest_input)``; return the new method name.

    For methods whose client step is not a method handler (FedStruct runs module functions
    inside ``run_round``): the deviation sits exactly where a malicious client acts, between
    computing its honest input and handing it to the mechanism, so the stack's transforms
    (``clip_norm``) still see the poisoned input, as a verified bound would.
    """
    bcls = method_class(base)
    mine = frozenset(members)

    def run_round(self: Method, fed: Any, r: int) -> Any:
        ex = fed.exchange
        honest_aggregate = ex.aggregate

        def aggregate(t: str, inputs: Any, **kw: Any) -> Any:
            if t == tag:
                inputs = {pid: (poison(dict(x)) if pid in mine else x) for pid, x in inputs.items()}
            return honest_aggregate(t, inputs, **kw)

        ex.aggregate = aggregate
        try:
            return bcls.run_round(self, fed, r)
        finally:
            del ex.aggregate  # back to the class's method

    attrs: dict[str, Any] = {"name": f"{bcls.name}+{label}", "run_round": run_round,
                             "__doc__": f"{bcls.__name__} with {sorted(mine)} poisoning {tag!r} ({label})."}
    cls: type[Method] = type(f"{bcls.__name__}MaliciousUploads{label.title().replace('_', '')}", (bcls,), attrs)
    register_method(cls)
    return str(cls.name)


__all__ = ["malicious_method", "malicious_uploads"]

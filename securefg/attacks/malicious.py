"""Malicious variants of a method: the same method with some clients deviating.

An active attack cannot be read from a transcript: the auditor runs the method again with the
adversarial clients' *client half* replaced. :func:`malicious_method` builds a subclass whose
handler wraps the honest one for the adversarial party ids only and registers it under a name
like ``"fedavg+scale"`` (the name is what ``result.json`` reports), so the run goes through the
unchanged experiment pipeline and protocol stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from securefg.methods.base import Method, method_class, register_method


def variant_label(behaviour: str, members: Iterable[str]) -> str:
    """``"<behaviour>@<client numbers>"``, e.g. ``"sign_flip10@0+2"``: names a malicious variant."""
    return f"{behaviour}@{'+'.join(c.split('/')[1] for c in members)}"


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


@contextmanager
def _intercepted(ex: Any, op: str, tag: str, members: frozenset[str], poison: Callable[[Any], Any]) -> Iterator[None]:
    """Within the block, ``ex.<op>(tag, inputs, ...)`` sees ``members``' inputs poisoned."""
    honest = getattr(ex, op)

    def call(t: str, inputs: Any, *args: Any, **kw: Any) -> Any:
        if t == tag:
            inputs = {pid: (poison(x) if pid in members else x) for pid, x in inputs.items()}
        return honest(t, inputs, *args, **kw)

    setattr(ex, op, call)
    try:
        yield
    finally:
        delattr(ex, op)  # back to the class's method


def malicious_uploads(base: str, label: str, members: Iterable[str], tag: str,
                      poison: Callable[[Any], Any], *, op: str = "aggregate",
                      also: Iterable[tuple[str, str]] = ()) -> str:
    """Register ``base`` with ``members``' inputs to exchange ``op`` (``aggregate`` or ``relay``)
    of ``tag`` replaced by ``poison(honest_input)``; return the new method name. ``also`` names
    further ``(op, tag)`` uploads poisoned the same way (FedStruct's ∇S rides its own
    ``shared_sum``, apart from the θ gradients).

    The deviation sits exactly where a malicious client acts, between computing its honest
    input and handing it to the exchange (:meth:`ClientExchange.deviate`), so the stack's
    transforms (``clip_norm``) still see the poisoned input, as a verified bound would.
    """
    bcls = method_class(base)
    mine = frozenset(members)
    targets = ((op, tag), *also)
    return _deviating_clients(bcls, label, mine, targets, poison, what=f"poisoning {tag!r} ({label})")


def _deviating_clients(bcls: type[Method], label: str, mine: frozenset[str], targets: Iterable[tuple[str, str]],
                       poison: Callable[[Any], Any], *, what: str, extra: dict[str, Any] | None = None) -> str:
    """A party-program method whose ``mine`` clients hand ``poison(honest)`` to each
    ``(exchange kind, tag)`` of ``targets`` (:meth:`ClientExchange.deviate`); others are honest."""
    honest_actions = bcls.client_actions

    def client_actions(self: Method) -> Any:
        def deviating(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
            def run(cli: Any) -> Any:
                if cli.pid in mine:
                    for kind, tag in targets:
                        cli.exchange.deviations[(kind, tag)] = poison
                return handler(cli)
            return run

        return {action: deviating(h) for action, h in honest_actions(self).items()}

    attrs: dict[str, Any] = {"name": f"{bcls.name}+{label}", "client_actions": client_actions,
                             "__doc__": f"{bcls.__name__} with {sorted(mine)} {what}.", **(extra or {})}
    cls: type[Method] = type(f"{bcls.__name__}Deviating{label.title().replace('_', '').replace('@', '')}", (bcls,), attrs)
    register_method(cls)
    return str(cls.name)


intercepted = _intercepted  # public name for other attack modules
deviating_clients = _deviating_clients

__all__ = ["intercepted", "malicious_method", "malicious_uploads", "variant_label"]

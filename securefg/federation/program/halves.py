"""The registry of exchange halves beyond ``aggregate``/``broadcast`` (one module per exchange kind).

A module carrying an exchange kind's halves (``peer_sum.py``, ``collect.py``, ...) registers its
client half with :func:`client_half`: a callable that takes a party's
:class:`~securefg.federation.program.exchange.ClientExchange` and registers that party's
handlers (``ex.rt.on(action, ...)``), keeping its per-call state on itself. ``KINDS`` lists the
modules to import; :class:`ClientExchange` builds every registered half for every party.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: Modules that register client halves (import order = registration order).
KINDS: tuple[str, ...] = ("securefg.federation.program.personalized", "securefg.federation.program.collect",
                        "securefg.federation.program.relay", "securefg.federation.program.peer_sum",
                        "securefg.federation.program.shared_sum", "securefg.federation.program.point_to_point")

_HALVES: dict[str, Callable[[Any], Any]] = {}


def client_half(name: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Decorator: register ``factory(client_exchange)`` under ``name`` (its attribute on the exchange)."""

    def register(factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
        _HALVES[name] = factory
        return factory

    return register


def build_halves(exchange: Any) -> dict[str, Any]:
    """Every registered client half, built for ``exchange``'s party."""
    for module in KINDS:
        importlib.import_module(module)
    return {name: factory(exchange) for name, factory in _HALVES.items()}

"""Which transforms an exchange kind can run, checked the same way wherever it runs.

A transform's server step (central noise, the accountant's record of a distributed release)
needs one result at the server. ``shared_sum`` may hand the server none (``blind_sum``),
``collect`` hands it every input, and a ``personalized_aggregate`` gives each client its own
mix: each refuses the transforms it cannot honour, before anything is released. Both the
lockstep exchange and the party-program halves call these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from securefg.errors import ConfigError


def _mode(t: Any) -> str | None:
    mode = getattr(t, "mode", None)
    return None if mode is None else str(getattr(mode, "value", mode))


def require_client_side(tag: str, transforms: Sequence[Any]) -> None:
    """``shared_sum``: only noise the clients add themselves (``distributed`` or ``local``)."""
    for t in transforms:
        if _mode(t) not in ("distributed", "local"):
            raise ConfigError(
                f"tag {tag!r}: transform {type(t).name!r} needs a server-side step on the result, which a "
                "shared_sum may not have (blind_sum hides it from the server); use dp_gaussian with "
                'mode = "distributed" or "local"')


def require_local(tag: str, transforms: Sequence[Any]) -> None:
    """``collect``: only transforms without a server step (``mode = "local"``)."""
    for t in transforms:
        mode = _mode(t)
        if mode is not None and mode != "local":
            raise ConfigError(
                f"tag {tag!r}: transform {type(t).name!r} in mode {mode!r} needs a server-side step, which a "
                "collect exchange has not (the server reads each input); use mode = \"local\"")


def refuse_all(tag: str, transforms: Sequence[Any]) -> None:
    """``personalized_aggregate``: no transform at all (there is no single result to noise)."""
    if transforms:
        raise ConfigError(
            f"tag {tag!r}: transforms {[type(t).name for t in transforms]} cannot run on a "
            "personalized_aggregate (each client receives its own mix; there is no single "
            "server-side result to noise); add noise on the inputs with mode = \"local\" on an "
            "aggregate or similarity tag instead")


#: Relay tags whose sending method applies the binding's transforms to its items itself, with
#: what it does. A relay carries opaque bytes the exchange cannot noise, so a transform on any
#: other relay tag would be ignored: it is refused instead.
_ITEM_TRANSFORMS: dict[str, str] = {}


def register_item_transforms(tag: str, how: str) -> None:
    """Declare that the method sending relay ``tag`` applies the tag's transforms to its items (``how``)."""
    _ITEM_TRANSFORMS[tag] = how


def require_item_transforms(tag: str, transforms: Sequence[Any]) -> None:
    """``relay``: transforms only on a tag whose method applies them (:func:`register_item_transforms`)."""
    if transforms and tag not in _ITEM_TRANSFORMS:
        raise ConfigError(
            f"tag {tag!r}: a relay forwards opaque items, so transforms {[type(t).name for t in transforms]} "
            "cannot run on it, and no method declared that it applies them to its items; remove them "
            f"(tags whose sender applies them: {sorted(_ITEM_TRANSFORMS) or 'none'})")

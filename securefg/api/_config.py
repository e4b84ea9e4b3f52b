"""How each public config object is built: from a stack file's binding, or from code.

Both paths go through [`ProtocolStack`][securefg.api.ProtocolStack], so a config made in code is
validated exactly as a stack file is: every invalid parameter is reported at once, and a setting
that voids a protection is refused unless it is marked ``unsafe = "<reason>"``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from securefg.errors import ConfigError
from securefg.protocol.guarantees import FailedProtection
from securefg.protocol.mechanism import ExchangeKind, Mechanism, Transform
from securefg.protocol.stack import ProtocolStack, Resolved

StackLike = ProtocolStack | str | os.PathLike[str]
"""A [`ProtocolStack`][securefg.api.ProtocolStack], a stack file's path, or a shipped stack's name."""

CODE_TAG = "securefg.api"


def stack_of(stack: StackLike) -> ProtocolStack:
    """``stack`` itself, or the stack read from a path or shipped name."""
    return stack if isinstance(stack, ProtocolStack) else ProtocolStack.load(stack)


def from_code(mechanism: str, kind: ExchangeKind, params: Mapping[str, Any], *, unsafe: str | None,
              what: str, transforms: tuple[Mapping[str, Any], ...] = ()) -> tuple[Resolved, ProtocolStack]:
    """The binding ``{mechanism, params, transforms, unsafe}`` as a one-tag stack, resolved.

    Raises:
        ConfigError: Every invalid parameter, and every voided protection without ``unsafe``.
    """
    table: dict[str, Any] = {"mechanism": mechanism, "params": dict(params), "transforms": [dict(t) for t in transforms]}
    if unsafe is not None:
        table["unsafe"] = unsafe
    stack = ProtocolStack.from_dict({"name": what, "tags": {CODE_TAG: table}}, source=f"{what}(...)")
    return stack.resolve(CODE_TAG, kind), stack


def from_stack(stack: StackLike, tag: str, kind: ExchangeKind, want: type[Mechanism], *,
               what: str) -> tuple[Resolved, ProtocolStack]:
    """The binding of ``tag`` in ``stack`` for an exchange of ``kind``, which must be carried by
    exactly ``want`` (a subclass is another mechanism, e.g. ``blind_sum`` is not ``secure_sum``).

    Raises:
        ConfigError: An invalid stack, a tag bound to another mechanism or not for ``kind``.
        UnboundTagError: No pattern of the stack binds ``tag``.
    """
    st = stack_of(stack)
    res = st.resolve(tag, kind)
    if type(res.mechanism) is not want:
        raise ConfigError(
            f"{what}.from_stack: stack {st.name!r} binds {tag!r} to {res.binding.mechanism!r}, not "
            f"{want.name!r}; pick the config class of that mechanism or another tag"
        )
    return res, st


def failed_protections(res: Resolved, stack: ProtocolStack) -> tuple[FailedProtection, ...]:
    """The protections ``stack`` waived (``unsafe``) on ``res``'s binding."""
    return tuple(f for f in stack.failed_protections if f.tag == res.binding.pattern)


def transform_names(transforms: tuple[Transform, ...]) -> tuple[str, ...]:
    """Names of a binding's transforms, in order."""
    return tuple(t.name for t in transforms)

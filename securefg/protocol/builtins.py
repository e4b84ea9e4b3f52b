"""Import every built-in mechanism and transform so that they register themselves.

A mechanism package that is not installed (or fails to import) is skipped here and reported
by :func:`securefg.protocol.mechanism.mechanism_class` as an unknown name.
"""

from __future__ import annotations

import importlib

_BUILTIN_MODULES = (
    "securefg.protocol.plaintext",
    "securefg.protocol.secure_sum",
    "securefg.protocol.ckks",
    "securefg.protocol.relay",
    "securefg.protocol.dp",
    "securefg.protocol.robust",
)

for _name in _BUILTIN_MODULES:
    try:
        importlib.import_module(_name)
    except ModuleNotFoundError as exc:  # a mechanism package not yet present
        if exc.name != _name:
            raise

"""Import every built-in method so that it registers itself."""

from __future__ import annotations

import importlib

for _name in (
    "securefg.methods.fedavg",
    "securefg.methods.fedsgd",
    "securefg.methods.local",
    "securefg.methods.centralized",
    "securefg.methods.cefgc",
    "securefg.methods.fedstruct",
    "securefg.methods.fedpub",
    "securefg.methods.fedsheafhn",
    "securefg.methods.fedsage",
):
    try:
        importlib.import_module(_name)
    except ModuleNotFoundError as exc:  # a method module not yet present
        if exc.name != _name:
            raise

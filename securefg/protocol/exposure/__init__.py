"""Exposure declarations: per mechanism and exchange kind, which party role reads a tag's payload.

* :mod:`.declaration` -- roles, the registry (``declare_exposure`` / ``exposure_of``) and how a
  party's roles and reading are resolved.
* :mod:`.builtin` -- the declarations of the built-in mechanisms.

The audit's exposure ledger is derived from these declarations (never guessed from wire forms).
"""

from securefg.protocol.exposure.declaration import (
    READS,
    ROLES,
    Exposure,
    declare_exposure,
    declared_mechanisms,
    exposure_of,
    reading,
    reading_roles,
    roles_of,
)

__all__ = ["READS", "ROLES", "Exposure", "declare_exposure", "declared_mechanisms", "exposure_of", "reading",
           "reading_roles", "roles_of"]

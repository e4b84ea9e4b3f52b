"""CeFGC and its variants (cefgc.md), split by concern.

* :mod:`.method` -- the four methods, server half and client half side by side, message tags.
* :mod:`.generators` -- phase 1 (diffusion training, sender's sampler choice) and phase 3 sampling.
* :mod:`.package` -- how models cross the relay (exact or dense/mixable packages).
* :mod:`.pairing` -- CeFGC+ pair averaging and the ``2 * avg - own`` recovery it allows.
* :mod:`.flights` -- paper rounds vs actual flights, bytes per phase, from the transcript.
"""

from __future__ import annotations

from securefg.methods.base import register_method
from securefg.methods.cefgc.method import (
    TAG_INIT,
    TAG_MODEL,
    TAG_SIMILARITY,
    TAG_WEIGHTS,
    CeFGC,
    CeFGCPlus,
    CeFGCStar,
    CeFGCStarPlus,
)
from securefg.methods.cefgc.pairing import partner_recovery, recover_partners

for _cls in (CeFGC, CeFGCStar, CeFGCPlus, CeFGCStarPlus):
    register_method(_cls)

__all__ = [
    "TAG_INIT",
    "TAG_MODEL",
    "TAG_SIMILARITY",
    "TAG_WEIGHTS",
    "CeFGC",
    "CeFGCPlus",
    "CeFGCStar",
    "CeFGCStarPlus",
    "partner_recovery",
    "recover_partners",
]

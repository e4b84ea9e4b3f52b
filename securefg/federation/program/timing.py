"""Where a party's time goes, for the cost-of-distribution bench (off unless asked for).

Set ``SECUREFG_TIMING=DIR`` and every party process accumulates wall seconds (and, under
``<phase>_cpu``, its own CPU seconds: on shared cores a handler's wall time includes waiting for
a core) per phase (``handler``:
inside its step handlers, i.e. our protocol and the method; ``serialize``: Flower message
(de)serialization; ``exchange``: the server waiting for a step's replies; ``ready``: seconds
from the launcher's spawn, ``SECUREFG_SPAWN_T``, to the party's first step) and writes them to
``DIR/<party>.json`` when it exits. Counting costs one ``perf_counter`` pair per step.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "SECUREFG_TIMING"
SPAWN_ENV = "SECUREFG_SPAWN_T"

SECONDS: dict[str, float] = defaultdict(float)
COUNTS: dict[str, int] = defaultdict(int)
_party: list[str] = []


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def reset() -> None:
    """Forget everything counted so far (a forked party starts from zero, not its parent's)."""
    SECONDS.clear()
    COUNTS.clear()
    _party.clear()


@contextmanager
def timed(phase: str) -> Iterator[None]:
    """Add the block's wall seconds to ``phase`` (only while ``SECUREFG_TIMING`` is set)."""
    if not enabled():
        yield
        return
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        SECONDS[phase] += time.perf_counter() - t0
        SECONDS[phase + "_cpu"] += time.process_time() - c0
        COUNTS[phase] += 1


def first_step(pid: str) -> None:
    """Mark this process as party ``pid``; the first call records its start-up delay."""
    if _party or not enabled():
        return
    _party.append(pid)
    spawned = os.environ.get(SPAWN_ENV)
    if spawned:
        SECONDS["ready"] = time.time() - float(spawned)
    atexit.register(_dump)


def flush() -> None:
    """Write this party's timings now (a forked party leaves with ``os._exit``, skipping atexit)."""
    if _party and enabled():
        _dump()


def _dump() -> None:
    out = Path(os.environ[ENV])
    out.mkdir(parents=True, exist_ok=True)
    (out / (_party[0].replace("/", "_") + ".json")).write_text(json.dumps({"seconds": dict(SECONDS), "counts": dict(COUNTS)}))

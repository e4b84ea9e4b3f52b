"""Strategies and checks shared by the fuzz modules.

The property every fuzz test states: a parser given any byte string (or document) either returns a
value or raises the typed error it documents (a :class:`~securefg.errors.SecureFGError` subclass),
never a bare ``ValueError``/``KeyError``/``struct.error``/..., never hangs and never allocates memory
in proportion to a *declared* length instead of the bytes actually received.
"""

from __future__ import annotations

import re
import time
import traceback
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import reject, settings
from hypothesis import strategies as st

from securefg.errors import SecureFGError

#: Settings of every fuzz test: the profile tests/fuzz/conftest.py selected (``ci`` or ``fuzz``).
FUZZ = settings.get_profile("securefg-fuzz-active")

#: Integers that break length, count and dimension fields: zero, one, sign and width boundaries.
EDGE_INTS = (0, 1, 2, 7, 8, 255, 256, 2**15, 2**16 - 1, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
             2**53, 2**62, 2**63 - 1, 2**63, 2**64 - 1)

#: Seconds one parse may take before it counts as a hang (generous: the CI machine is shared).
MAX_SECONDS = 10.0

T = TypeVar("T")


@st.composite
def mutated(draw: st.DrawFn, valid: bytes, *, max_edits: int = 4) -> bytes:
    """``valid`` after 1..``max_edits`` edits: flipped bits, overwritten bytes, a length-like field
    overwritten with an edge integer (u16/u32/u64, little- or big-endian), a truncation, an
    insertion, a deletion, or a duplicated slice."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, max_edits))):
        op = draw(st.sampled_from(("flip", "byte", "int", "truncate", "insert", "delete", "dup")))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "int":
            width = draw(st.sampled_from((2, 4, 8)))
            value = draw(st.sampled_from(EDGE_INTS)) % (1 << (8 * width))
            order = draw(st.sampled_from(("little", "big")))
            data[pos : pos + width] = value.to_bytes(width, order)
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 16))]
        elif op == "dup":
            end = pos + draw(st.integers(1, 32))
            data[pos:pos] = data[pos:end]
    return bytes(data)


@dataclass(frozen=True)
class KnownCrash:
    """A crash this suite found in a file another engineer is editing, pinned by a strict xfail.

    A property test rejects (skips) an input that ends in exactly this crash, so it keeps
    searching for others; once the file is fixed the crash no longer occurs and nothing is skipped.

    Args:
        where (str): Path suffix of the source file whose frame raised it.
        error (type): The bare exception type.
        message (str): A regex the exception's message matches.
        pinned_by (str): The strict-xfail test with the minimal input.
    """

    where: str
    error: type[BaseException]
    message: str
    pinned_by: str

    def matches(self, exc: BaseException) -> bool:
        frames = traceback.extract_tb(exc.__traceback__)
        return (type(exc) is self.error and re.search(self.message, str(exc)) is not None
                and bool(frames) and frames[-1].filename.replace("\\", "/").endswith(self.where))


def parse_or_typed(parse: Callable[..., T], *args: Any, errors: type[SecureFGError] | tuple[type[SecureFGError], ...],
                   known: Sequence[KnownCrash] = (), **kwargs: Any) -> T | None:
    """Run ``parse``; return its value, or ``None`` if it raised one of the typed ``errors``.

    Anything else (a bare ``ValueError``, ``struct.error``, ``IndexError``, ...) propagates and
    fails the test with the input hypothesis shrank it to, unless it is one of the ``known``
    crashes (the input is then rejected). A parse slower than :data:`MAX_SECONDS` fails as a hang.
    """
    start = time.monotonic()
    try:
        return parse(*args, **kwargs)
    except errors:
        return None
    except Exception as exc:
        if any(k.matches(exc) for k in known):
            reject()
        raise
    finally:
        elapsed = time.monotonic() - start
        assert elapsed < MAX_SECONDS, f"{getattr(parse, '__name__', parse)} took {elapsed:.1f} s"


def peak_traced_bytes(fn: Callable[[], object]) -> int:
    """Peak memory (bytes) Python and numpy allocate while ``fn`` runs (its exceptions propagate).

    Used to check that a parser's allocation follows the bytes it received, not the lengths they
    declare (numpy reports its buffers to :mod:`tracemalloc`; torch and TenSEAL do not, so the
    checks bound the numpy/Python side of each decoder).
    """
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

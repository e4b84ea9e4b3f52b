"""Mask expansion: a 32-byte seed -> a uniform vector over Z_{2^bits}, from a stream cipher.

The keystream comes from ``cryptography`` (OpenSSL): AES-256-CTR (default) or ChaCha20,
keyed by the seed with an all-zero initial counter block. Each seed keys exactly one
expansion (seeds are fresh per round, tag and pair), so the fixed counter is safe. The ring is
a power of two, so reading the little-endian keystream as words of 16, 32 or 64 bits (the
narrowest that holds ``bits``; :func:`ring_dtype`) and keeping their low ``bits`` bits gives
exactly uniform ring elements: no rejection sampling, no folding of the seed. Arithmetic mod
2^16/2^32/2^64 reduces correctly mod 2^bits, so masks are added as whole words and the
reduction (``& (2^bits - 1)``) happens once, when the vector is packed or decoded.

Speed: the keystream is produced chunk by chunk into a cache-sized buffer with
``update_into`` and added to (or subtracted from) the accumulator in place by numpy, so the
whole expansion is one pass over memory (see ``bench/secure_sum.py``, ``mask_rate_vs_aes``).
"""

from __future__ import annotations

import enum

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms, modes

from securefg.errors import InvalidInputError

SEED_BYTES = 32
"""Seeds are 256-bit keys (the AES-256 / ChaCha20 key size)."""
CHUNK_WORDS = 1 << 15
"""Words per chunk: 256 KiB of keystream at 64 bits, which stays in L2 cache."""


class Prg(str, enum.Enum):
    """The stream cipher that expands seeds into masks."""

    AES_CTR = "aes-ctr"
    CHACHA20 = "chacha20"


def keystream_cipher(prg: Prg, key: bytes, nonce: bytes = bytes(16)) -> CipherContext:
    """The raw keystream generator: an encryptor whose output on zero bytes is the keystream.

    Args:
        prg (Prg): AES-256-CTR or ChaCha20.
        key (bytes): 32-byte key.
        nonce (bytes): 16-byte initial counter block (AES-CTR) or ``counter || nonce``
            (ChaCha20, as ``cryptography`` takes it). (default: all zeros)
    """
    if len(key) != SEED_BYTES:
        raise InvalidInputError(f"mask seeds are {SEED_BYTES} bytes, got {len(key)}")
    if prg is Prg.AES_CTR:
        return Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()
    return Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()


MAX_RING_BITS = 64
"""The widest ring: elements are held in machine words."""


def ring_dtype(bits: int) -> np.dtype:
    """The unsigned word that holds elements of Z_{2^bits}: 16, 32 or 64 bits (``bits`` in 1..64)."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= MAX_RING_BITS:
        raise InvalidInputError(f"ring size must be 2^1 .. 2^{MAX_RING_BITS}, got 2^{bits}")
    return np.dtype("<u2") if bits <= 16 else np.dtype("<u4") if bits <= 32 else np.dtype("<u8")


def ring_mask(bits: int) -> int:
    """``2^bits - 1``: AND a word with it to reduce it into Z_{2^bits}."""
    return (1 << bits) - 1


class MaskExpander:
    """Expands seeds into masks and adds them into an accumulator, chunk by chunk.

    One instance owns reusable chunk buffers; it is not shared between parties.

    Args:
        prg (Prg): The stream cipher. (default: AES-256-CTR)
        bits (int): Ring size exponent, 1..64; masks are words of :func:`ring_dtype` (bits).
            (default: ``64``)
    """

    def __init__(self, prg: Prg = Prg.AES_CTR, bits: int = 64) -> None:
        self.prg = Prg(prg)
        self.bits = bits
        self.dtype = ring_dtype(bits)
        nbytes = CHUNK_WORDS * self.dtype.itemsize
        self._zeros = bytearray(nbytes)
        # update_into wants an output buffer one block longer than the input.
        self._out = bytearray(nbytes + 16)
        self._words = np.frombuffer(self._out, dtype=self.dtype, count=CHUNK_WORDS)

    def expand(self, seed: bytes, length: int) -> np.ndarray:
        """The mask of ``length`` ring elements for ``seed`` (a fresh array, reduced mod 2^bits)."""
        out = np.zeros(length, dtype=self.dtype)
        self.add_into(out, seed)
        if self.bits < 8 * self.dtype.itemsize:
            out &= self.dtype.type(ring_mask(self.bits))
        return out

    def add_into(self, acc: np.ndarray, seed: bytes, *, subtract: bool = False) -> None:
        """``acc += mask(seed)`` (or ``-=``) modulo the word size, in place; hence also modulo
        2^bits once the caller reduces ``acc``.

        Raises:
            InvalidInputError: if ``acc`` is not a contiguous 1-D array of the ring dtype.
        """
        if acc.dtype != self.dtype or acc.ndim != 1 or not acc.flags.c_contiguous:
            raise InvalidInputError(f"accumulator must be a contiguous 1-D {self.dtype} array")
        enc = keystream_cipher(self.prg, seed)
        op = np.subtract if subtract else np.add
        step = self.dtype.itemsize
        for start in range(0, acc.size, CHUNK_WORDS):
            n = min(CHUNK_WORDS, acc.size - start)
            src = self._zeros if n == CHUNK_WORDS else memoryview(self._zeros)[: n * step]
            enc.update_into(src, self._out)
            view = acc[start : start + n]
            op(view, self._words[:n], out=view)

"""Mask expansion: a 32-byte seed -> a uniform vector over Z_{2^bits}, from a stream cipher.

The keystream comes from ``cryptography`` (OpenSSL): AES-128-CTR (default), AES-256-CTR or
ChaCha20. AES-128 takes the 32-byte seed as key (first half) and initial counter block (second
half); AES-256 and ChaCha20 take the whole seed as key with an all-zero counter. Each seed keys
exactly one expansion (seeds are fresh per round, tag and pair), so a fixed counter is safe.
AES-128 is the default because the seeds come from X25519 agreements (about 128-bit security),
so AES-256's four extra rounds buy no security here, and they cost a third of the keystream
rate (11.9 vs 8.8 GB/s on this machine's AES-NI; the server's unmasking is mostly keystream). The ring is
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
CHUNK_BYTES = 1 << 18
"""Keystream bytes per chunk: 256 KiB, which stays in L2 cache (fewer, larger cipher calls
than 128 KiB measured a few percent faster for 32-bit rings)."""
CHUNK_WORDS = CHUNK_BYTES // 8
"""Words per chunk in a 64-bit ring (narrower rings take proportionally more words)."""


class Prg(str, enum.Enum):
    """The stream cipher that expands seeds into masks."""

    AES128_CTR = "aes128-ctr"
    AES_CTR = "aes-ctr"
    """AES-256-CTR (the name predates AES-128 support)."""
    CHACHA20 = "chacha20"


def keystream_cipher(prg: Prg, key: bytes, nonce: bytes | None = None) -> CipherContext:
    """The raw keystream generator: an encryptor whose output on zero bytes is the keystream.

    Args:
        prg (Prg): AES-128-CTR, AES-256-CTR or ChaCha20.
        key (bytes): a 32-byte seed; for AES-128 also a bare 16-byte key when ``nonce`` is given.
        nonce (bytes, optional): 16-byte initial counter block (AES-CTR) or ``counter || nonce``
            (ChaCha20, as ``cryptography`` takes it). (default: AES-128: the seed's second
            half; otherwise all zeros)
    """
    if prg is Prg.AES128_CTR and nonce is not None and len(key) == SEED_BYTES // 2:
        return Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()
    if len(key) != SEED_BYTES:
        raise InvalidInputError(f"mask seeds are {SEED_BYTES} bytes, got {len(key)}")
    if prg is Prg.AES128_CTR:
        half = SEED_BYTES // 2
        return Cipher(algorithms.AES(key[:half]), modes.CTR(key[half:] if nonce is None else nonce)).encryptor()
    nonce = bytes(16) if nonce is None else nonce
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
        prg (Prg): The stream cipher. (default: AES-128-CTR)
        bits (int): Ring size exponent, 1..64; masks are words of :func:`ring_dtype` (bits).
            (default: ``64``)
    """

    def __init__(self, prg: Prg = Prg.AES128_CTR, bits: int = 64) -> None:
        self.prg = Prg(prg)
        self.bits = bits
        self.dtype = ring_dtype(bits)
        self._chunk = CHUNK_BYTES // self.dtype.itemsize
        self._zeros = bytearray(CHUNK_BYTES)
        # update_into wants an output buffer one block longer than the input.
        self._out = bytearray(CHUNK_BYTES + 16)
        self._words = np.frombuffer(self._out, dtype=self.dtype, count=self._chunk)

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
        chunk = self._chunk
        for start in range(0, acc.size, chunk):
            n = min(chunk, acc.size - start)
            src = self._zeros if n == chunk else memoryview(self._zeros)[: n * step]
            enc.update_into(src, self._out)
            view = acc[start : start + n]
            op(view, self._words[:n], out=view)

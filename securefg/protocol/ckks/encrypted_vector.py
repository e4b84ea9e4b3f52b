"""A CKKS-encrypted vector of any length, packed into full-slot TenSEAL ciphertexts.

A vector of length L is split into ``ceil(L / slots)`` chunks; every chunk is zero-padded to the
full slot count, so that TenSEAL's rotate-and-sum (``dot``) leaves the *whole* sum in every slot.
A short vector meant only for inner products may instead be encrypted *windowed*
(``encrypt(v, window=True)``): one chunk of ``W = 2^ceil(log2 L)`` slots, so that ``dot`` rotates
``log2 W`` times instead of ``log2 slots`` (3 instead of 12 for an 8-value embedding at N=8192:
6.7 ms instead of 18.9 ms per product). Slot 0 still receives the whole sum; the other slots hold
partial window sums until :meth:`EncryptedVector.dot`'s one-hot mask zeroes them, so a decryptor
sees the scalar and CKKS noise either way.

Wire format (little-endian), parsed with explicit checks, never pickled::

    b"SFGC" | u8 version | u64 length | u32 chunk_size | u32 count | count * (u32 len | chunk)

``chunk`` is TenSEAL's own protobuf serialization of one ``CKKSVector`` (no context inside).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import tenseal as ts
import torch

from securefg.errors import CodecError, InvalidInputError

if TYPE_CHECKING:  # pragma: no cover
    from securefg.protocol.ckks.public_context import PublicContext
    from securefg.protocol.ckks.secret_context import SecretContext

MAGIC = b"SFGC"
VERSION = 1
_HEADER = struct.Struct("<4sBQII")
#: A sanity cap per encrypted vector; callers pass tighter limits when they know the length.
DEFAULT_MAX_BYTES = 2**33


def window_size(length: int) -> int:
    """Slots of a windowed chunk holding ``length`` values: the next power of two, at least 2
    (a chunk of 1 slot means an already reduced scalar)."""
    return max(2, 1 << max(0, int(length) - 1).bit_length())


def _primes_left(chunk: ts.CKKSVector) -> int:
    return int(chunk.ciphertext()[0].coeff_modulus_size())


class EncryptedVector:
    """A real vector under CKKS, as a list of full-slot ciphertext chunks.

    Build one with :meth:`SecretContext.encrypt` / :meth:`PublicContext.encrypt`, or parse received
    bytes with ``context.load(data)``. Decrypting needs a :class:`SecretContext`.

    Args:
        chunks (Sequence[ts.CKKSVector]): The ciphertexts (all linked to one context).
        length (int): Number of meaningful values (the rest of the last chunk is padding).
    """

    __slots__ = ("_chunks", "_length")

    def __init__(self, chunks: Sequence[ts.CKKSVector], length: int) -> None:
        if not chunks:
            raise InvalidInputError("an encrypted vector needs at least one ciphertext")
        self._chunks = list(chunks)
        self._length = int(length)

    # ------------------------------------------------------------------------ properties
    @property
    def length(self) -> int:
        """Number of meaningful values."""
        return self._length

    @property
    def num_chunks(self) -> int:
        """Number of ciphertexts."""
        return len(self._chunks)

    @property
    def chunk_size(self) -> int:
        """Slots per ciphertext (the full slot count, or 1 for reduced scalars)."""
        return int(self._chunks[0].size())

    def is_public(self) -> bool:
        """Whether the context these ciphertexts are linked to holds no secret key."""
        return bool(self._chunks[0].context().is_public())

    # ------------------------------------------------------------------------ encryption
    @classmethod
    def _encrypt(cls, ctx: ts.Context, vector: torch.Tensor, slots: int, *, window: bool = False) -> EncryptedVector:
        """Encrypt ``vector`` under ``ctx`` (public-key encryption): used by the context types.

        ``window``: a vector of at most ``slots`` values becomes one chunk of the next power of
        two (at least 2) slots, for cheaper ``dot`` (see the module docstring).
        """
        if not isinstance(vector, torch.Tensor) or vector.dim() != 1:
            raise InvalidInputError("CKKS encrypts 1-D tensors; flatten named tensors first")
        if vector.numel() == 0:
            raise InvalidInputError("cannot encrypt an empty vector")
        arr = vector.detach().to("cpu", torch.float64).numpy()
        if not np.isfinite(arr).all():
            raise InvalidInputError("cannot encrypt NaN or Inf")
        n = arr.size
        if window and n <= slots:
            padded = np.zeros(window_size(n), dtype=np.float64)
            padded[:n] = arr
            return cls([ts.ckks_vector(ctx, padded.tolist())], n)
        count = math.ceil(n / slots)
        padded = np.zeros(count * slots, dtype=np.float64)
        padded[:n] = arr
        chunks = [ts.ckks_vector(ctx, padded[i * slots : (i + 1) * slots].tolist()) for i in range(count)]
        return cls(chunks, n)

    @classmethod
    def _decrypt(cls, vec: EncryptedVector, secret_key: ts.enc_context.SecretKey) -> torch.Tensor:
        """Decrypt with ``secret_key``: only :class:`SecretContext` calls it."""
        parts = [np.asarray(c.decrypt(secret_key), dtype=np.float64) for c in vec._chunks]
        flat = np.concatenate(parts)[: vec._length]
        return torch.from_numpy(flat)

    # ------------------------------------------------------------------------ arithmetic
    @property
    def modulus_primes(self) -> int:
        """Primes left in the ciphertexts' modulus (one fewer after each rescale)."""
        sizes = {_primes_left(c) for c in self._chunks}
        if len(sizes) != 1:
            raise InvalidInputError(f"chunks of one vector sit at different levels {sorted(sizes)}")
        return int(sizes.pop())

    def _check_compatible(self, other: EncryptedVector, op: str) -> None:
        if not isinstance(other, EncryptedVector):
            raise InvalidInputError(f"cannot {op} an EncryptedVector and a {type(other).__name__}")
        if (self._length, self.num_chunks, self.chunk_size) != (other._length, other.num_chunks, other.chunk_size):
            raise InvalidInputError(
                f"cannot {op} encrypted vectors of lengths {self._length} and {other._length}"
            )
        if _primes_left(self._chunks[0]) != _primes_left(other._chunks[0]):  # chunks share a level
            # Mod-switching a fresh term down to a rescaled one would mix scale factors that the
            # decryptor corrects per level (see SecretContext.decrypt): multiply both sides.
            raise InvalidInputError(
                f"cannot {op} ciphertexts after different numbers of multiplications "
                f"({_primes_left(self._chunks[0])} vs {_primes_left(other._chunks[0])} primes left); "
                "multiply every term"
            )

    def __add__(self, other: EncryptedVector) -> EncryptedVector:
        """Slot-wise sum (no level consumed)."""
        self._check_compatible(other, "add")
        return EncryptedVector([a + b for a, b in zip(self._chunks, other._chunks)], self._length)

    def __mul__(self, scalar: float) -> EncryptedVector:
        """Multiply by a public scalar: one level, even for ``1.0`` (keeps levels uniform)."""
        s = float(scalar)
        if not math.isfinite(s):
            raise InvalidInputError(f"cannot multiply by {s}")
        return EncryptedVector([c * s for c in self._chunks], self._length)

    __rmul__ = __mul__

    @classmethod
    def linear_combination(cls, terms: Sequence[tuple[EncryptedVector, float]]) -> EncryptedVector:
        """``sum_k a_k * x_k`` for public scalars ``a_k``, with *no* rescale.

        Every product sits at scale ``Delta^2`` on the top level, so the terms add directly and
        the result decrypts exactly at that scale (no rescale-prime factor). Rescaling is the
        costly part of a plaintext multiply (about 3/4 of it at N=8192), and a K x K mix would
        pay it K^2 times per chunk. The integer headroom at scale ``Delta^2`` on the top level,
        ``sum(data primes) - 2 * scale_bits``, is never below the rescaled result's
        (``first prime - scale_bits``), so nothing that decrypts correctly after a rescale
        overflows here. The result has the upload's size (one prime more than a rescaled one).
        """
        if not terms:
            raise InvalidInputError("a linear combination needs at least one term")
        first = terms[0][0]
        for vec, a in terms:
            first._check_compatible(vec, "combine")
            if not math.isfinite(float(a)):
                raise InvalidInputError(f"cannot multiply by {a}")
        ctx = first._chunks[0].context()
        previous = ctx.auto_rescale
        ctx.auto_rescale = False
        try:
            acc: list[ts.CKKSVector] = []
            for vec, a in terms:
                for k, chunk in enumerate(vec._chunks):
                    term = chunk * float(a)
                    if k < len(acc):
                        acc[k].add_(term)
                    else:
                        acc.append(term)
        finally:
            ctx.auto_rescale = previous
        return cls(acc, first._length)

    def times_encrypted(self, factor: EncryptedVector) -> EncryptedVector:
        """Every value times an encrypted scalar held in *every* slot of ``factor``'s one full-slot
        chunk (one ciphertext product per chunk: one level). The multiplier stays hidden."""
        if factor.num_chunks != 1 or factor.chunk_size != self.chunk_size:
            raise InvalidInputError("the factor must be one full-slot ciphertext holding the scalar in every slot")
        if _primes_left(self._chunks[0]) != _primes_left(factor._chunks[0]):
            raise InvalidInputError("cannot multiply ciphertexts at different levels")
        f = factor._chunks[0]
        return EncryptedVector([c * f for c in self._chunks], self._length)

    def masked_product(self, other: EncryptedVector, offset: torch.Tensor) -> EncryptedVector:
        """Slot-wise product of two one-chunk vectors plus a public ``offset`` (one value per slot
        of the chunk, padding included: the result's length is the chunk's): one level, no rotation.

        With ``offset`` a large random vector summing to zero, the decryptor learns the inner
        product (the sum of the slots) and nothing else about the slot-wise products (they are
        flooded), at about a fifth of :meth:`dot`'s cost (which pays log2(slots) rotations).
        """
        self._check_compatible(other, "multiply")
        if self.num_chunks != 1:
            raise InvalidInputError("a masked product needs one chunk on each side")
        if offset.numel() != self.chunk_size or not bool(torch.isfinite(offset).all()):
            raise InvalidInputError(f"the offset must be {self.chunk_size} finite values")
        return EncryptedVector([self._chunks[0] * other._chunks[0] + offset.to(torch.float64).tolist()], self.chunk_size)

    def dot(self, other: EncryptedVector) -> EncryptedVector:
        """Encrypted inner product as a length-1 vector with every other slot masked to zero.

        Costs two levels (the ciphertext product, then the one-hot mask) and needs Galois keys.
        Because chunks are full-slot, rotate-and-sum puts the whole sum in *every* slot; the mask
        then keeps only slot 0, so a decryptor sees the scalar and CKKS noise, nothing else.
        """
        self._check_compatible(other, "dot")
        if self.chunk_size == 1:
            raise InvalidInputError("dot of already-reduced scalars is not supported")
        # Slot-wise products summed over the chunks first, then one rotate-and-sum: a vector of
        # C chunks pays log2(slots) rotations once, not C times (3.2x faster at C = 6, N = 8192).
        total = None
        for a, b in zip(self._chunks, other._chunks):
            d = a * b
            total = d if total is None else total + d
        assert total is not None
        total = total.sum()
        # A length-1 plaintext is encoded as [1, 0, ..., 0]: the one-hot mask on slot 0.
        return EncryptedVector([total * [1.0]], 1)

    def rerandomize(self, context: PublicContext | SecretContext) -> EncryptedVector:
        """Add a fresh public-key encryption of zero to every chunk.

        The result decrypts to the same values (up to CKKS noise) but its bytes are unlinkable to
        this ciphertext's for anyone without the secret key.
        """
        zeros = context.encrypt_zeros(self.chunk_size * self.num_chunks, chunk_size=self.chunk_size)
        return EncryptedVector([a + z for a, z in zip(self._chunks, zeros._chunks)], self._length)

    # ------------------------------------------------------------------------------ codec
    def to_bytes(self) -> bytes:
        """Serialize (ciphertexts only; the context never travels with them)."""
        parts = [_HEADER.pack(MAGIC, VERSION, self._length, self.chunk_size, self.num_chunks)]
        for c in self._chunks:
            raw = c.serialize()
            parts.append(struct.pack("<I", len(raw)))
            parts.append(raw)
        return b"".join(parts)

    @classmethod
    def _from_bytes(
        cls,
        ctx: ts.Context,
        data: bytes,
        *,
        slots: int,
        expected_length: int | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> EncryptedVector:
        """Parse bytes from :meth:`to_bytes` and link the ciphertexts to ``ctx``.

        Raises:
            CodecError: bad magic or version, wrong sizes, trailing bytes, or ciphertexts that
                TenSEAL/SEAL reject for this context's parameters.
        """
        if not isinstance(data, (bytes, bytearray)):
            raise CodecError(f"encrypted vector must be bytes, got {type(data).__name__}")
        if len(data) > max_bytes:
            raise CodecError(f"encrypted vector of {len(data)} bytes exceeds the limit of {max_bytes}")
        if len(data) < _HEADER.size:
            raise CodecError("encrypted vector truncated (header)")
        magic, version, length, chunk_size, count = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise CodecError("payload is not a securefg CKKS vector (bad magic)")
        if version != VERSION:
            raise CodecError(f"unsupported CKKS vector version {version} (this build reads {VERSION})")
        if expected_length is not None and length != expected_length:
            raise CodecError(f"encrypted vector has length {length}, expected {expected_length}")
        if length == 0:
            raise CodecError("encrypted vector declares length 0")
        windowed = count == 1 and chunk_size == window_size(length) and chunk_size < slots
        if not (chunk_size == slots or (chunk_size == 1 and length == 1) or windowed):
            raise CodecError(f"chunk size {chunk_size} does not match this context ({slots} slots) "
                             f"for {length} values")
        if count != math.ceil(length / chunk_size):
            raise CodecError(f"{count} chunks cannot hold exactly {length} values of {chunk_size} slots")
        pos = _HEADER.size
        chunks: list[ts.CKKSVector] = []
        for i in range(count):
            if pos + 4 > len(data):
                raise CodecError(f"encrypted vector truncated (chunk {i} length)")
            (n,) = struct.unpack_from("<I", data, pos)
            pos += 4
            if pos + n > len(data):
                raise CodecError(f"encrypted vector truncated (chunk {i})")
            try:
                chunk = ts.ckks_vector_from(ctx, bytes(data[pos : pos + n]))
            except Exception as exc:  # TenSEAL raises ValueError/RuntimeError/TypeError
                raise CodecError(f"chunk {i} is not a valid ciphertext for this context: {exc}") from exc
            if chunk.size() != chunk_size:
                raise CodecError(f"chunk {i} holds {chunk.size()} slots, header says {chunk_size}")
            chunks.append(chunk)
            pos += n
        if pos != len(data):
            raise CodecError(f"{len(data) - pos} trailing bytes after the last ciphertext")
        return cls(chunks, length)

    def __repr__(self) -> str:
        return f"EncryptedVector(length={self._length}, chunks={self.num_chunks})"

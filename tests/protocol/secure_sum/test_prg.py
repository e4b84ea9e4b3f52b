"""Known answers and properties of the mask expansion (``prg.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from securefg.errors import InvalidInputError
from securefg.protocol.secure_sum.prg import CHUNK_BYTES, SEED_BYTES, MaskExpander, Prg, keystream_cipher

# NIST SP 800-38A, F.5.5 CTR-AES256.Encrypt (blocks 1-4).
NIST_KEY = bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
NIST_CTR = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
NIST_PT = bytes.fromhex(
    "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710"
)
NIST_CT = bytes.fromhex(
    "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"
    "2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6"
)
# RFC 8439, 2.3.2: ChaCha20 block function, key 00..1f, nonce 000000090000004a00000000, counter 1.
RFC_KEY = bytes(range(32))
RFC_NONCE16 = (1).to_bytes(4, "little") + bytes.fromhex("000000090000004a00000000")
RFC_BLOCK = bytes.fromhex(
    "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
    "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e"
)


def test_aes_ctr_keystream_matches_nist_sp800_38a_f55() -> None:
    stream = keystream_cipher(Prg.AES_CTR, NIST_KEY, NIST_CTR).update(bytes(64))
    assert bytes(a ^ b for a, b in zip(stream, NIST_PT)) == NIST_CT


# NIST SP 800-38A, F.5.1 CTR-AES128.Encrypt (block 1).
NIST128_KEY = bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c")
NIST128_PT = bytes.fromhex("6bc1bee22e409f96e93d7e117393172a")
NIST128_CT = bytes.fromhex("874d6191b620e3261bef6864990db6ce")


def test_aes128_ctr_keystream_matches_nist_sp800_38a_f51() -> None:
    stream = keystream_cipher(Prg.AES128_CTR, NIST128_KEY, NIST_CTR).update(bytes(16))
    assert bytes(a ^ b for a, b in zip(stream, NIST128_PT)) == NIST128_CT


def test_aes128_seed_is_key_then_initial_counter_block() -> None:
    seed = NIST128_KEY + NIST_CTR
    mask = MaskExpander(Prg.AES128_CTR, 64).expand(seed, 2)
    assert bytes(a ^ b for a, b in zip(mask.tobytes(), NIST128_PT)) == NIST128_CT


def test_default_prg_is_aes128_ctr() -> None:
    assert MaskExpander().prg is Prg.AES128_CTR


def test_chacha20_keystream_matches_rfc8439_block_function() -> None:
    assert keystream_cipher(Prg.CHACHA20, RFC_KEY, RFC_NONCE16).update(bytes(64)) == RFC_BLOCK


def test_aes_ctr_keystream_rejects_a_wrong_nist_answer() -> None:
    stream = keystream_cipher(Prg.AES_CTR, NIST_KEY, NIST_CTR).update(bytes(64))
    wrong = bytes([NIST_CT[0] ^ 1]) + NIST_CT[1:]
    assert bytes(a ^ b for a, b in zip(stream, NIST_PT)) != wrong


@pytest.mark.parametrize("prg", list(Prg))
@pytest.mark.parametrize("bits", [32, 64])
def test_mask_is_the_little_endian_keystream_of_the_seed(prg: Prg, bits: int) -> None:
    seed = bytes(range(100, 132))
    length = CHUNK_BYTES // (bits // 8) + 37  # crosses a chunk boundary
    mask = MaskExpander(prg, bits).expand(seed, length)
    raw = keystream_cipher(prg, seed).update(bytes(length * bits // 8))
    assert np.array_equal(mask, np.frombuffer(raw, dtype=f"<u{bits // 8}"))


def test_mask_expansion_of_the_nist_key_starts_with_the_aes_of_a_zero_block() -> None:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    block = Cipher(algorithms.AES(NIST_KEY), modes.ECB()).encryptor().update(bytes(16))
    mask = MaskExpander(Prg.AES_CTR, 64).expand(NIST_KEY, 2)
    assert mask.tobytes() == block


def test_add_then_subtract_the_same_mask_restores_the_accumulator() -> None:
    acc = np.arange(1000, dtype=np.uint64) * np.uint64(2**40)
    before = acc.copy()
    ex = MaskExpander(Prg.AES_CTR, 64)
    ex.add_into(acc, bytes(32))
    assert not np.array_equal(acc, before)
    ex.add_into(acc, bytes(32), subtract=True)
    assert np.array_equal(acc, before)


def test_modular_add_wraps_around_the_ring() -> None:
    seed = bytes(32)
    ex = MaskExpander(Prg.AES_CTR, 32)
    mask = ex.expand(seed, 10)
    acc = np.full(10, 2**32 - 1, dtype=np.uint32)
    ex.add_into(acc, seed)
    assert np.array_equal(acc, (mask.astype(np.uint64) + 2**32 - 1).astype(np.uint32))


def test_seeds_are_256_bits_and_shorter_seeds_are_refused() -> None:
    assert SEED_BYTES * 8 >= 128
    with pytest.raises(InvalidInputError, match="mask seeds are 32 bytes"):
        MaskExpander().expand(bytes(16), 4)


def test_accumulator_of_the_wrong_dtype_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="contiguous 1-D"):
        MaskExpander(Prg.AES_CTR, 64).add_into(np.zeros(4, dtype=np.uint32), bytes(32))

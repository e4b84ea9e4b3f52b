"""Shamir sharing over GF(2^256 + 297): known answers and threshold behaviour."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securefg.errors import CodecError, InvalidInputError
from securefg.protocol.secure_sum import shamir


def _miller_rabin(n: int, bases: tuple[int, ...]) -> bool:
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in bases:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def test_field_modulus_is_the_smallest_prime_above_2_to_the_256() -> None:
    bases = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53)
    assert shamir.PRIME == 2**256 + 297
    assert _miller_rabin(shamir.PRIME, bases)
    assert not any(_miller_rabin(2**256 + d, bases) for d in range(1, 297, 2))


def _fixed(values: list[int]):  # type: ignore[no-untyped-def]
    """A fake CSPRNG returning chosen coefficients (33-byte big-endian each)."""
    it = iter(values)
    return lambda n: next(it).to_bytes(n, "big")


def test_shares_match_a_hand_computed_line() -> None:
    secret = (1234).to_bytes(32, "big")
    got = shamir.split(secret, [1, 2, 3], 2, rand=_fixed([166]))
    assert got == {1: 1400, 2: 1566, 3: 1732}  # f(x) = 1234 + 166 x


def test_shares_wrap_around_the_prime() -> None:
    secret = (2**256 - 1).to_bytes(32, "big")
    got = shamir.split(secret, [1], 2 - 1, rand=_fixed([]))
    assert got == {1: 2**256 - 1}
    got = shamir.split(secret, [1, 2], 2, rand=_fixed([300]))
    assert got == {1: (2**256 - 1 + 300) - shamir.PRIME, 2: (2**256 - 1 + 600) - shamir.PRIME}


def test_reconstruction_of_the_hand_computed_line_from_any_two_points() -> None:
    for pair in itertools.combinations({1: 1400, 2: 1566, 3: 1732}.items(), 2):
        assert shamir.reconstruct(dict(pair), 2) == (1234).to_bytes(32, "big")


@settings(max_examples=25, deadline=None)
@given(k=st.integers(1, 9), data=st.data())
def test_any_t_of_k_shares_reconstruct_and_t_minus_1_do_not(k: int, data: st.DataObject) -> None:
    t = data.draw(st.integers(1, k))
    secret = os.urandom(32)
    xs = data.draw(st.lists(st.integers(1, 1000), min_size=k, max_size=k, unique=True))
    shares = shamir.split(secret, xs, t)
    subset = data.draw(st.lists(st.sampled_from(xs), min_size=t, max_size=t, unique=True))
    assert shamir.reconstruct({x: shares[x] for x in subset}, t) == secret
    if t > 1:
        short = {x: shares[x] for x in subset[:-1]}
        with pytest.raises(InvalidInputError, match=f"need {t} shares"):
            shamir.reconstruct(short, t)


def test_a_corrupted_share_does_not_reconstruct_the_secret() -> None:
    secret = os.urandom(32)
    shares = shamir.split(secret, [1, 2, 3], 3)
    shares[2] = (shares[2] + 1) % shamir.PRIME
    try:
        assert shamir.reconstruct(shares, 3) != secret
    except CodecError as exc:  # the wrong value may even exceed 32 bytes
        assert "inconsistent" in str(exc)


def test_share_codec_rejects_values_outside_the_field() -> None:
    with pytest.raises(CodecError, match="not a field element"):
        shamir.decode_share(shamir.PRIME.to_bytes(33, "big"))
    with pytest.raises(CodecError, match="33 bytes, got 32"):
        shamir.decode_share(bytes(32))


def test_split_refuses_a_threshold_above_the_number_of_holders() -> None:
    with pytest.raises(InvalidInputError, match="threshold 4 must be in 1..3"):
        shamir.split(bytes(32), [1, 2, 3], 4)

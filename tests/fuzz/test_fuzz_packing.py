"""Fuzz the secure sum's wire: packed ring vectors (packing.py) and stage messages (messages.py).

Strategies: ring vectors of every width 1..64 bits and 0..300 elements; their encodings mutated
(bit flips, a length field set to an edge integer, truncation, insertion); arbitrary bytes; every
stage message built from hypothesis-drawn ids, keys and shares, then mutated. Also the relay's
summed vector (relay_sum.py), the blinded result (blinded_result.py) and Shamir shares
(shamir.py). Properties: every decoder returns a value or raises ``CodecError`` (the one error
its callers turn into a dropped client or an abort); round trips are exact; a parsed message
re-encodes to the bytes received.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from securefg.errors import CodecError
from securefg.protocol.secure_sum import messages as m
from securefg.protocol.secure_sum.blinded_result import BlindedResult
from securefg.protocol.secure_sum.constants import ShareKind
from securefg.protocol.secure_sum.packing import decode_packed, encode_packed, packed_size
from securefg.protocol.secure_sum.prg import ring_dtype
from securefg.protocol.secure_sum.relay_sum import decode_summed, encode_summed
from securefg.protocol.secure_sum.shamir import PRIME, SHARE_BYTES, decode_share, encode_share

from .strategies import EDGE_INTS, FUZZ, mutated, parse_or_typed, peak_traced_bytes


@st.composite
def ring_vectors(draw: st.DrawFn, *, max_len: int = 300) -> tuple[int, np.ndarray]:
    bits = draw(st.integers(1, 64))
    n = draw(st.integers(0, max_len))
    raw = draw(st.binary(min_size=8 * n, max_size=8 * n))
    return bits, np.frombuffer(raw, dtype="<u8") & np.uint64((1 << bits) - 1)


ids = st.lists(st.text(max_size=10), max_size=5).map(tuple)
blobs = st.binary(max_size=40)


@FUZZ
@given(ring_vectors())
def test_any_ring_vector_round_trips(vec):
    bits, values = vec
    data = encode_packed(values, bits)
    assert len(data) == 10 + packed_size(values.size, bits)
    assert np.array_equal(decode_packed(data, bits=bits, length=values.size), values)


@FUZZ
@given(st.data())
def test_mutated_packings_parse_or_raise_codec_error(data):
    bits, values = data.draw(ring_vectors(max_len=64))
    wire = data.draw(mutated(encode_packed(values, bits)))
    got = parse_or_typed(decode_packed, wire, bits=bits, length=values.size, errors=CodecError)
    if got is not None:  # one encoding per vector: whatever parses is what was sent
        assert encode_packed(got, bits) == wire


@FUZZ
@given(st.binary(max_size=64), st.integers(1, 64), st.sampled_from(EDGE_INTS))
@example(b"\x01\x40" + struct.pack("<Q", 2**64 - 1), 64, 2**64 - 1)  # declares 2^64 - 1 elements, sends none
def test_arbitrary_bytes_and_declared_lengths_never_allocate_for_the_declaration(data, bits, length):
    peak = peak_traced_bytes(lambda: parse_or_typed(decode_packed, data, bits=bits, length=length, errors=CodecError))
    assert peak < (1 << 20)


@FUZZ
@given(ring_vectors(max_len=64), ids)
def test_the_relays_summed_vector_round_trips_and_its_mutations_parse_or_raise(vec, who):
    bits, values = vec
    wire = encode_summed(who, values.astype(ring_dtype(bits)), bits)
    got_ids, total = decode_summed(wire, bits=bits, length=values.size)
    assert got_ids == who and np.array_equal(total, values)


@FUZZ
@given(st.data())
def test_mutated_summed_vectors_parse_or_raise_codec_error(data):
    bits, values = data.draw(ring_vectors(max_len=32))
    wire = data.draw(mutated(encode_summed(data.draw(ids), values.astype(ring_dtype(bits)), bits)))
    parse_or_typed(decode_summed, wire, bits=bits, length=values.size, errors=CodecError)


@st.composite
def blinded_results(draw: st.DrawFn) -> BlindedResult:
    bits, values = draw(ring_vectors(max_len=32))
    survivors = tuple(draw(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n"), min_size=1,
                                            max_size=8), max_size=4)))
    return BlindedResult(draw(st.integers(0, 2**32 - 1)), bits, survivors, values.astype(ring_dtype(bits)))


@FUZZ
@given(blinded_results())
def test_a_blinded_result_round_trips(res):
    got = BlindedResult.decode(res.encode())
    assert (got.clients, got.bits, got.survivors) == (res.clients, res.bits, res.survivors)
    assert np.array_equal(got.ring_sum, res.ring_sum)


def _blinded(clients: int, bits: int, length: int) -> bytes:
    """A blinded result with no survivors whose header declares ``bits`` and ``length``."""
    return m.length_prefixed(struct.pack("<III", clients, bits, length), b"", encode_packed(np.zeros(0, np.uint64), 8))


@FUZZ
@given(blinded_results().flatmap(lambda res: mutated(res.encode())))
@example(_blinded(2, 0, 0))  # found by this suite: a 0-bit ring raised InvalidInputError from ring_dtype
@example(_blinded(2, 65, 0))
def test_mutated_blinded_results_parse_or_raise_codec_error(wire):
    parse_or_typed(BlindedResult.decode, wire, errors=CodecError)


@pytest.mark.parametrize("bits", [0, 65, 2**32 - 1])
def test_a_blinded_result_declaring_a_ring_outside_1_to_64_bits_is_a_codec_error(bits):
    # found by the fuzz suite: ring_dtype(bits) raised InvalidInputError, which a client does not
    # read as a malformed server message
    with pytest.raises(CodecError, match="ring of 2\\^"):
        BlindedResult.decode(_blinded(2, bits, 0))


@FUZZ
@given(st.integers(0, PRIME - 1))
def test_a_share_round_trips(y):
    assert decode_share(encode_share(y)) == y


@FUZZ
@given(st.binary(min_size=SHARE_BYTES - 2, max_size=SHARE_BYTES + 2))
@example(b"\xff" * SHARE_BYTES)
def test_arbitrary_share_bytes_parse_or_raise_codec_error(data):
    got = parse_or_typed(decode_share, data, errors=CodecError)
    if got is not None:
        assert 0 <= got < PRIME and encode_share(got) == data


# --------------------------------------------------------------------------- stage messages
@st.composite
def peer_keys(draw: st.DrawFn) -> m.PeerKeys:
    return m.PeerKeys(draw(st.text(max_size=10)), draw(blobs), draw(blobs), draw(blobs), draw(blobs))


def _message_cases() -> st.SearchStrategy[tuple[str, bytes, object]]:
    """``(decoder name, encoding, value it must decode to)`` for every stage message."""
    signed = st.booleans()
    advertise = st.builds(
        lambda c, nb, t, k, ln, key, sig, s: (
            ("advertise", s),
            m.AdvertiseRequest(c, nb, t, k, ln, key, sig if s else b"").encode(signed=s),
            m.AdvertiseRequest(c, nb, t, k, ln, key, sig if s else b""),
        ),
        ids, ids, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), blobs, blobs, signed,
    )
    keys = st.builds(
        lambda k, s: (("keys", s, k.pid), m.encode_keys(k, signed=s),
                      m.PeerKeys(k.pid, k.c_pk, k.s_pk, k.sign_pk, k.key_sig if s else b"")),
        peer_keys(), signed,
    )
    peers = st.builds(
        lambda ps, s: (("peer_keys", s), m.encode_peer_keys(ps, signed=s),
                       [m.PeerKeys(p.pid, p.c_pk, p.s_pk, p.sign_pk, p.key_sig if s else b"") for p in ps]),
        st.lists(peer_keys(), max_size=4), signed,
    )
    addressed = st.lists(st.tuples(st.text(max_size=10), blobs), max_size=4).map(
        lambda rows: (("addressed",), m.encode_addressed(rows), rows))
    share = st.tuples(st.text(max_size=10), st.text(max_size=10), blobs, blobs).map(
        lambda t: (("share",), m.encode_share_plaintext(*t), t))
    unmask = st.builds(
        lambda a, d, sg: (("unmask",), m.UnmaskRequest(a, d, tuple(sg)).encode(), m.UnmaskRequest(a, d, tuple(sg))),
        ids, ids, st.lists(st.tuples(st.text(max_size=10), blobs), max_size=3),
    )
    shares = st.lists(st.tuples(st.text(max_size=10), st.sampled_from(list(ShareKind)), blobs), max_size=4).map(
        lambda rows: (("unmask_shares",), m.encode_unmask_shares(rows), rows))
    id_list = ids.map(lambda i: (("ids",), m.encode_ids(i), i))
    return st.one_of(advertise, keys, peers, addressed, share, unmask, shares, id_list)


def _decode(which: tuple, data: bytes) -> object:
    kind = which[0]
    if kind == "advertise":
        return m.AdvertiseRequest.decode(data, signed=which[1])
    if kind == "keys":
        return m.decode_keys(which[2], data, signed=which[1])
    if kind == "peer_keys":
        return m.decode_peer_keys(data, signed=which[1])
    if kind == "addressed":
        return m.decode_addressed(data, "rows")
    if kind == "share":
        return m.decode_share_plaintext(data)
    if kind == "unmask":
        return m.UnmaskRequest.decode(data)
    if kind == "unmask_shares":
        return m.decode_unmask_shares(data)
    return m.decode_ids(data)


@FUZZ
@given(_message_cases())
def test_every_stage_message_round_trips(case):
    which, data, value = case
    assert _decode(which, data) == value


@FUZZ
@given(st.data())
def test_mutated_stage_messages_parse_or_raise_codec_error(data):
    which, wire, _ = data.draw(_message_cases())
    parse_or_typed(_decode, which, data.draw(mutated(wire)), errors=CodecError)


_DECODER_NAMES = [("advertise", False), ("advertise", True), ("keys", False, "p"), ("keys", True, "p"),
                  ("peer_keys", False), ("peer_keys", True), ("addressed",), ("share",), ("unmask",),
                  ("unmask_shares",), ("ids",)]


@FUZZ
@given(st.sampled_from(_DECODER_NAMES), st.binary(max_size=120))
@example(("ids",), struct.pack("<I", 4) + struct.pack("<I", 2**32 - 1))  # 2^32 - 1 rows declared, none sent
@example(("ids",), struct.pack("<I", 4) + struct.pack("<I", 1 << 20) + struct.pack("<I", 2**32 - 1))
def test_arbitrary_bytes_as_any_stage_message_parse_or_raise_codec_error(which, data):
    peak = peak_traced_bytes(lambda: parse_or_typed(_decode, which, data, errors=CodecError))
    assert peak < (1 << 20)

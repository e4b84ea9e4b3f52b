import pytest

from securefg.errors import InvalidInputError
from securefg.protocol.dp.shuffle import shuffle_amplification


# Published values for delta=1e-6, local epsilon 1 (Feldman, McMillan and Talwar 2021): about
# 0.65 at n=1e3 and 0.23 at n=1e4. Only the authors' released closed form gives these; the
# Theorem 3.1 formula as printed gives 0.566 and 0.214 (computed by hand from the formula).
@pytest.mark.parametrize(("n", "published"), [(1_000, 0.65), (10_000, 0.23)])
def test_reference_variant_reproduces_published_values(n, published):
    assert shuffle_amplification(1.0, n=n, delta=1e-6) == pytest.approx(published, abs=0.005)


@pytest.mark.parametrize(("n", "by_hand"), [(1_000, 0.5662), (10_000, 0.2140)])
def test_theorem_variant_matches_the_printed_formula(n, by_hand):
    assert shuffle_amplification(1.0, n=n, delta=1e-6, variant="theorem") == pytest.approx(by_hand, abs=1e-4)


def test_reference_variant_is_never_below_the_theorem_variant():
    for eps0 in (0.1, 0.5, 1.0, 2.0):
        for n in (10_000, 100_000, 1_000_000):
            ref = shuffle_amplification(eps0, n=n, delta=1e-6)
            thm = shuffle_amplification(eps0, n=n, delta=1e-6, variant="theorem")
            assert thm <= ref < eps0


def test_more_reports_amplify_more():
    values = [shuffle_amplification(1.0, n=n, delta=1e-6) for n in (1_000, 10_000, 100_000)]
    assert values == sorted(values, reverse=True)


def test_bound_refuses_parameters_outside_its_range():
    # log(100 / (16 log(4e6))) < 0: no local epsilon is in range for 100 reports
    with pytest.raises(InvalidInputError, match=r"needs epsilon0 <= log\(n / \(16 log\(4/delta\)\)\)"):
        shuffle_amplification(1.0, n=100, delta=1e-6)
    with pytest.raises(InvalidInputError, match="unknown shuffle bound variant"):
        shuffle_amplification(1.0, n=1000, delta=1e-6, variant="numerical")

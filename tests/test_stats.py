"""The one Python Wilson interval gives exactly what the views' SQL macros give; the
comparison of two strategies gives the published reference values."""

from __future__ import annotations

import math

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from midtrace.sql import sqlfiles
from midtrace.schemas.stats import (SIGNIFICANCE, Z95, mcnemar_test, paired_difference,
                                    paired_sample_size, two_proportion_test, unpaired_difference,
                                    unpaired_sample_size, weighted_accuracy, wilson)


@pytest.fixture(scope="module")
def conn() -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect()
    conn.execute("CREATE TABLE settings (key VARCHAR, value DOUBLE, help VARCHAR)")
    conn.execute(sqlfiles.render_view(next(v for v in sqlfiles.views() if v.name == "helpers")))
    return conn


@pytest.mark.parametrize(("successes", "n"), [(0, 0), (0, 7), (7, 7), (3, 10), (1, 1000),
                                              (0, 3), (18, 45)])
def test_wilson_is_the_sql_macro(conn: duckdb.DuckDBPyConnection, successes: int, n: int) -> None:
    # integer columns, as the views pass their counts
    expected = conn.execute("SELECT wilson_low(s, n), wilson_high(s, n) "
                            "FROM (SELECT $s::BIGINT AS s, $n::BIGINT AS n)",
                            {"s": successes, "n": n}).fetchone()
    assert wilson(successes, n) == expected  # the same floats, not merely close


def test_the_interval_stays_within_zero_and_one() -> None:
    assert wilson(0, 0) == (None, None)
    assert wilson(0, 7)[0] == 0.0 and wilson(7, 7)[1] == 1.0
    low, high = wilson(3, 10)
    assert (round(low, 4), round(high, 4)) == (0.1078, 0.6032)


def test_the_two_proportion_test() -> None:
    # 50/100 -> 65/100: pooled 0.575, se = sqrt(0.575 * 0.425 * 0.02) = 0.069911,
    # z = 0.15 / 0.069911 = 2.1456, two-sided p = erfc(2.1456 / sqrt 2) = 0.0319
    z, p = two_proportion_test(50, 100, 65, 100)
    assert z == pytest.approx(2.1456, abs=1e-4) and p == pytest.approx(0.0319, abs=1e-4)
    z_down, p_down = two_proportion_test(65, 100, 50, 100)
    assert z_down == pytest.approx(-z) and p_down == pytest.approx(p)
    assert two_proportion_test(0, 0, 5, 10) == (None, None)
    assert two_proportion_test(10, 10, 7, 7) == (0.0, 1.0)
    assert two_proportion_test(5, 10, 5, 10)[1] == pytest.approx(1.0)


# --- two strategies compared ------------------------------------------------------------------
# Reference values: the R package contingencytables (Fagerland, Lydersen & Laake, "Statistical
# Analysis of Contingency Tables"), its tests of chapters 4 and 8, printed to four decimals.


def test_tangos_paired_interval_matches_the_reference() -> None:
    # cavo_2012: 59 both, 6 first only, 16 second only, 80 neither; the reference prints
    # first minus second: -0.0621 (95% CI -0.1240 to -0.0054). B minus A flips the sign.
    estimate, low, high = paired_difference(only_a=6, only_b=16, n=161)
    assert round(estimate, 4) == 0.0621
    assert (round(low, 4), round(high, 4)) == (0.0054, 0.1240)
    # 3 pairs, all right under B alone: 1.0000 (95% CI -0.1230 to 1.0000), and mirrored
    assert [round(v, 4) for v in paired_difference(0, 3, 3)] == [1.0, -0.1230, 1.0]
    assert [round(v, 4) for v in paired_difference(3, 0, 3)] == [-1.0, -1.0, 0.1230]
    assert paired_difference(0, 0, 0) == (None, None, None)


def test_no_discordant_pair_still_has_an_interval() -> None:
    # every pair agrees: the difference is 0 and the score interval is +-z^2 / (n + z^2)
    # (solve n d / sqrt(n d (1 - d)) = z for d): 20 pairs give 3.8415 / 23.8415 = 0.1611
    estimate, low, high = paired_difference(0, 0, 20)
    edge = Z95 ** 2 / (20 + Z95 ** 2)
    assert estimate == 0 and high == pytest.approx(edge, abs=1e-9)
    assert low == pytest.approx(-edge, abs=1e-9) and round(edge, 4) == 0.1611


def test_mcnemar_matches_the_reference() -> None:
    # cavo_2012: "The McNemar asymptotic test: P = 0.033006, Z = -2.132" (first minus second)
    z, p = mcnemar_test(only_a=6, only_b=16)
    assert round(z, 3) == 2.132 and round(p, 6) == 0.033006
    assert mcnemar_test(16, 6)[0] == pytest.approx(-z)
    assert mcnemar_test(0, 0) == (0.0, 1.0)


def test_mees_unpaired_interval_matches_the_reference() -> None:
    # perondi_2004: 7/34 against 1/34: 0.1765 (95% CI 0.0284 to 0.3439)
    estimate, low, high = unpaired_difference(1, 34, 7, 34)
    assert round(estimate, 4) == 0.1765
    assert (round(low, 4), round(high, 4)) == (0.0284, 0.3439)
    back = unpaired_difference(7, 34, 1, 34)
    assert back[1] == pytest.approx(-high) and back[2] == pytest.approx(-low)
    assert unpaired_difference(0, 0, 1, 2) == (None, None, None)
    # 10/10 against 10/10: no difference, and an interval around it
    estimate, low, high = unpaired_difference(10, 10, 10, 10)
    assert estimate == 0 and -1 < low < 0 < high < 1


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 80))
def test_the_paired_interval_excludes_zero_exactly_when_mcnemar_calls_it(
        only_a: int, only_b: int, concordant: int) -> None:
    n = only_a + only_b + concordant
    if n == 0:
        return
    estimate, low, high = paired_difference(only_a, only_b, n)
    _, p = mcnemar_test(only_a, only_b)
    assert low <= estimate <= high
    if abs(p - SIGNIFICANCE) > 1e-6:  # on the boundary itself rounding may go either way
        assert (p < SIGNIFICANCE) == (low > 0 or high < 0), (only_a, only_b, n, low, high, p)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 60), st.integers(1, 60), st.data())
def test_the_unpaired_interval_excludes_zero_exactly_when_the_z_test_calls_it(
        n1: int, n2: int, data: st.DataObject) -> None:
    x1 = data.draw(st.integers(0, n1))
    x2 = data.draw(st.integers(0, n2))
    estimate, low, high = unpaired_difference(x1, n1, x2, n2)
    _, p = two_proportion_test(x1, n1, x2, n2)
    assert low <= estimate <= high
    if abs(p - SIGNIFICANCE) > 1e-6:
        assert (p < SIGNIFICANCE) == (low > 0 or high < 0), (x1, n1, x2, n2, low, high, p)


def test_sample_sizes_by_hand() -> None:
    # Connor 1987: psi = 0.5, d = 0.1 -> (1.959964 sqrt(0.5) + 0.841621 sqrt(0.49))^2 / 0.01
    # = (1.385904 + 0.589135)^2 / 0.01 = 390.08 pairs
    assert paired_sample_size(20, 30, 100) == pytest.approx(390.08, abs=0.01)
    # 3 of 9 pairs right under B alone: psi = d = 1/3: (1.131585 + 0.396746)^2 * 9 = 21.02
    assert paired_sample_size(0, 3, 9) == pytest.approx(21.02, abs=0.01)
    assert paired_sample_size(4, 4, 10) is None and paired_sample_size(0, 0, 0) is None
    # Fleiss: 0.5 -> 0.6: (1.959964 sqrt(0.495) + 0.841621 sqrt(0.49))^2 / 0.01 = 387.34
    assert unpaired_sample_size(0.5, 0.6) == pytest.approx(387.34, abs=0.01)
    assert unpaired_sample_size(0.6, 0.5) == pytest.approx(387.34, abs=0.01)
    assert unpaired_sample_size(0.7, 0.7) is None


def test_weighted_accuracy_by_hand() -> None:
    # ranks 1 and 2 at 9/10 and 5/10, weighted 3:1 -> 0.75 * 0.9 + 0.25 * 0.5 = 0.8
    average, low, high = weighted_accuracy([(3, 9, 10), (1, 5, 10)])
    assert average == pytest.approx(0.8)
    # nt = 13.841459, pt = (9 + 1.920730) / nt = 0.788986 and (5 + 1.920730) / nt = 0.5;
    # variance = 0.5625 * 0.788986 * 0.211014 / nt + 0.0625 * 0.25 / nt = 0.0079937
    spread = Z95 * math.sqrt(0.5625 * 0.788986 * 0.211014 / 13.841459 + 0.0625 * 0.25 / 13.841459)
    assert (low, high) == (pytest.approx(0.8 - spread, abs=1e-6),
                           pytest.approx(0.8 + spread, abs=1e-6))
    # equal weights: the plain mean; a stratum without n or weight is left out
    assert weighted_accuracy([(1, 9, 10), (1, 5, 10), (1, 0, 0), (0, 1, 10)])[0] == pytest.approx(0.7)
    assert weighted_accuracy([(1, 0, 0)]) == (None, None, None)
    assert weighted_accuracy([(1, 10, 10)])[2] == 1.0  # clamped

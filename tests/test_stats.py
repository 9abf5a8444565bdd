"""The one Python Wilson interval gives exactly what the views' SQL macros give."""

from __future__ import annotations

import duckdb
import pytest

from midtrace.sql import sqlfiles
from midtrace.schemas.stats import two_proportion_test, wilson


@pytest.fixture(scope="module")
def conn() -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect()
    conn.execute("CREATE TABLE settings (key VARCHAR, value DOUBLE, help VARCHAR)")
    conn.execute(next(v for v in sqlfiles.views() if v.name == "helpers").sql)
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

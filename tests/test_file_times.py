"""The order the test files are run in (tests/file_times.py)."""

from __future__ import annotations

from pathlib import Path

from tests import file_times

ROOT = Path(__file__).resolve().parent.parent


def test_files_run_longest_first_each_files_tests_in_their_order() -> None:
    ids = ["tests/a.py::one", "tests/b.py::one", "tests/a.py::two", "tests/new.py::x",
           "tests/b.py::two", "tests/c.py::one"]
    times = {"tests/a.py": 5.0, "tests/b.py": 90.0, "tests/c.py": 40.0}
    order = [ids[i] for i in file_times.longest_first(ids, times)]
    assert order == ["tests/b.py::one", "tests/b.py::two", "tests/c.py::one", "tests/new.py::x",
                     "tests/a.py::one", "tests/a.py::two"]


def test_junit_times_are_summed_per_file_with_classes_folded_in(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_x" name="a" time="1.25"/>'
        '<testcase classname="tests.test_x.TestGroup" name="b" time="2.5"/>'
        '<testcase classname="tests.e2e.test_y" name="c" time="7"/>'
        '</testsuite></testsuites>')
    assert file_times.from_junit(junit) == {"tests/e2e/test_y.py": 7.0, "tests/test_x.py": 3.8}


def test_every_recorded_file_exists() -> None:
    recorded = file_times.load()
    assert len(recorded) > 50
    assert [name for name in recorded if not (ROOT / name).is_file()] == []

"""collector/keep_out.py: a package kept out of a process, unless it is already in it."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_a_package_not_yet_imported_is_kept_out() -> None:
    done = run("from midtrace.collector.keep_out import keep_out; keep_out()\n"
               "try:\n    import pandas\nexcept ModuleNotFoundError as e:\n    print('out', e)\n")
    assert done.stdout.startswith("out No module named 'pandas'"), done.stdout + done.stderr


def test_a_package_already_imported_keeps_working() -> None:
    """A command that keeps pandas out, run inside a process that uses it (a test), must not
    break its modules imported later: this failed a figure test run after such a command."""
    done = run("import pandas as pd\nfrom midtrace.collector.keep_out import keep_out; keep_out()\n"
               "df = pd.DataFrame({'a': ['x', 'y'], 'b': ['p', 'q'], 'n': [1, 2]})\n"
               "print(df.pivot_table(index='a', columns='b', values='n', aggfunc='sum').shape)\n")
    assert done.returncode == 0 and done.stdout.strip() == "(2, 2)", done.stdout + done.stderr

"""The `midtrace` command: a thin layer over library functions.

Each command calls one function and turns midtrace's own errors into a one-line message
and an exit code. The commands live in midtrace/commands/, one module per group; every
option can also be set by the environment variable shown in `--help` (flag > MIDTRACE_*
variable > default).
"""

from __future__ import annotations

import logging

import click

from midtrace.commands import cases, grading, reading, replaying, serving, storage, sweeping


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("--log-level", envvar="MIDTRACE_LOG_LEVEL", default="warning", show_envvar=True,
              type=click.Choice(["debug", "info", "warning", "error"]), help="Logging verbosity.")
def cli(log_level: str) -> None:
    """midtrace: where the evidence sat in the prompt when a RAG answer went wrong."""
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    if log_level in ("warning", "error"):
        # A ClickHouse store that cannot be reached is said in one line (midtrace/client.py);
        # the ClickHouse driver's warnings about its retries would only repeat it.
        for name in ("clickhouse_connect", "urllib3.connectionpool"):
            logging.getLogger(name).setLevel(logging.ERROR)


for command in (serving.collector, serving.dashboard, serving.serve, serving.demo,
                storage.ingest, storage.rebuild, storage.prune, storage.export,
                reading.report, reading.gate, grading.grade, cases.cases, sweeping.sweep,
                replaying.replay):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="midtrace")

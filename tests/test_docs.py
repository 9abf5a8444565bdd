"""Every CLI option and MIDTRACE_* variable is documented in docs/*.md."""

from __future__ import annotations

from pathlib import Path

import click

from midtrace.cli import cli

DOCS = Path(__file__).resolve().parent.parent / "docs"

# Arguments of one invocation (what to read, how to print it), not settings of a deployment:
# they take no environment variable, so a stray MIDTRACE_SINCE cannot silently narrow a report.
PER_CALL = {("report", "--since"), ("report", "--until"), ("report", "--filter"),
            ("report", "--group-by"), ("report", "--format"), ("report", "--output"),
            ("gate", "--since"), ("gate", "--until"), ("gate", "--filter"), ("gate", "--cases"),
            ("gate", "--api-key-env"), ("sweep", "--cases"), ("sweep", "--api-key-env"),
            ("grade", "--since"), ("grade", "--until"),
            ("grade", "--filter"), ("grade", "--references"), ("grade", "--list-unmatched"),
            ("grade", "--api-key-env"), ("grade", "--budget-usd"), ("grade", "--follow"),
            ("cases", "--since"), ("cases", "--until"), ("cases", "--filter"),
            ("cases", "--class"), ("cases", "--trace-id"), ("cases", "--references"),
            ("cases", "--output"), ("replay", "--trace-id"), ("replay", "--strategies"),
            ("replay", "--repeats"), ("replay", "--references"), ("replay", "--api-key-env"),
            ("replay", "--experiment"), ("replay", "--concurrency"), ("replay", "--max-tokens"),
            ("replay", "--dry-run"), ("replay", "--json")}


def options() -> list[tuple[str, click.Option]]:
    found = [("midtrace", p) for p in cli.params if isinstance(p, click.Option)]
    for name, command in sorted(cli.commands.items()):
        found += [(name, p) for p in command.params if isinstance(p, click.Option)]
    return found


def test_every_option_and_variable_is_documented() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md")))
    missing = []
    for command, option in options():
        for flag in option.opts + option.secondary_opts:
            if flag.startswith("--") and f"`{flag}" not in text:
                missing.append(f"{command} {flag}")
        envvars = [option.envvar] if isinstance(option.envvar, str) else list(option.envvar or [])
        if not envvars and option.name != "help" and (command, option.opts[0]) not in PER_CALL:
            missing.append(f"{command} {option.opts[0]} has no MIDTRACE_* variable")
        for var in envvars:
            if f"`{var}`" not in text:
                missing.append(f"{command} {var}")
    assert not missing, "undocumented in docs/*.md: " + ", ".join(missing)


def test_the_check_sees_commands_added_later() -> None:
    assert {"collector", "ingest", "rebuild", "prune", "export"} <= set(cli.commands)
    assert any(o.envvar == "MIDTRACE_TOKEN" for _, o in options())

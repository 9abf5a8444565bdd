"""What a sweep is run with: the one place its defaults are written (the `midtrace sweep`
options take theirs from here). Light to import: the CLI reads it at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from midtrace.collector.settings import ClickHouseURL
from midtrace.llm import RetryPolicy
from midtrace.sweep import prompt as prompts
from midtrace.sweep.conditions import RankSpec


@dataclass(frozen=True)
class SweepSettings:
    cases: Path
    endpoint: str
    model: str
    experiment: str | None = None
    ranks: RankSpec = RankSpec("all")
    strategies: tuple[str, ...] = ("score_order",)
    absent: bool = False
    repeats: int = 1
    concurrency: int = 4
    template: prompts.Template | None = None
    url: str | None = None
    token: str | None = None
    db: Path | ClickHouseURL | None = None  # the store a sweep without --url writes to
    state_dir: Path | None = None
    api_key: str | None = None
    timeout: float = 120.0
    retry: RetryPolicy = RetryPolicy()
    temperature: float = 0.0
    max_tokens: int = 100
    prices: Path | None = None  # the price table a --store is opened with (midtrace/prices.py)

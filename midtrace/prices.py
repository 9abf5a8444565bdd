"""The price table: what a model's tokens cost, one file for all of midtrace (docs/grading.md,
"The price table").

JSON ``{model: {"input_per_mtok": x, "output_per_mtok": y}}``, US dollars per million
tokens, by the model name sent to the endpoint. Keys starting with ``_`` are comments; an
entry may carry ``"example": true`` (the shipped file's entries are examples). The file is
``--prices FILE``, else ``MIDTRACE_PRICES``, else the one shipped beside this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PRICES = Path(__file__).resolve().parent / "prices.json"
ENV = "MIDTRACE_PRICES"


class PriceError(ValueError):
    """The price table cannot be read, or an entry is not a price."""


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    example: bool = False

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok
                + completion_tokens * self.output_per_mtok) / 1_000_000


def prices_path(given: Path | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    if given is not None:
        return given
    return Path(environ[ENV]) if environ.get(ENV) else DEFAULT_PRICES


def load_prices(path: Path) -> dict[str, Price]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise PriceError(f"cannot read the price table {path}: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise PriceError(f"{path} is not JSON: {e.msg} at line {e.lineno}") from e
    if not isinstance(data, dict):
        raise PriceError(f"{path} must be a JSON object {{model: {{input_per_mtok, "
                         f"output_per_mtok}}}}")
    out: dict[str, Price] = {}
    for model, entry in data.items():
        if model.startswith("_"):
            continue
        try:
            values = [entry[k] for k in ("input_per_mtok", "output_per_mtok")]
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                       for v in values):
                raise TypeError
        except (TypeError, KeyError):
            raise PriceError(f"{path}: {model}: want {{\"input_per_mtok\": x, "
                             f"\"output_per_mtok\": y}}, numbers >= 0") from None
        out[model] = Price(float(values[0]), float(values[1]), bool(entry.get("example")))
    return out

"""The JSON text a span's attributes are stored as (collector/storage/rows.py ``dumps``) reads
back as exactly what the json module's text reads back as, whatever the values: orjson
writes it where the two agree, and every value on which they could differ (NaN, infinities,
lone surrogates, integers beyond 64 bits, keys that are not strings) goes to the json
module. Only the spelling of some floats differs (orjson's 1e-6 for json's 1e-06)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from midtrace.collector.storage.rows import _json_dumps, dumps


def read(text: str) -> str:
    """What the text reads back as, each value with its type (True == 1 in Python, and NaN
    is not equal to itself)."""
    def typed(value: Any) -> Any:
        if isinstance(value, list):
            return [typed(v) for v in value]
        if isinstance(value, dict):
            return {k: typed(v) for k, v in value.items()}
        return (type(value).__name__, repr(value))
    return repr(typed(json.loads(text)))

scalars = st.one_of(st.none(), st.text(max_size=5), st.booleans(), st.integers(-2**80, 2**80),
                    st.floats(), st.binary(max_size=3))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=3), inner, max_size=4)),
    max_leaves=25)


@given(st.dictionaries(st.text(max_size=8), values, max_size=6))
@example({"score": float("nan")})
@example({"scores": [0.5, float("inf"), None]})
@example({"nested": {"at": [None, float("-inf")]}})
@example({"huge": [1e308, 1e308], "none": None})
@example({"scores": [float("nan"), None], "said": "null"})  # a null that is a NaN, one in a string
@example({"kv": {"at": None}, "ids": ["a", None], "score": float("inf")})
@example({"surrogate": "\ud800 x"})
@example({"big": 2**64})
@example({"bytes": b"\x00\xff"})
@example({"text": "é \u2028 \x7f \x01 \"quoted\" \\ null"})
def test_span_attributes_are_stored_as_the_json_module_writes_them(attributes: dict[str, Any]) -> None:
    assert read(dumps(attributes)) == read(_json_dumps(attributes))
    if not any(isinstance(v, float) for v in leaves(attributes)):
        assert dumps(attributes) == _json_dumps(attributes)


def leaves(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [leaf for v in value for leaf in leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    return [value]


def test_keys_that_are_not_strings_are_written_as_the_json_module_writes_them() -> None:
    value = {"kv": {1: "one", 2.5: None, False: [1.0]}}
    assert dumps(value) == _json_dumps(value) == '{"kv":{"1":"one","2.5":null,"false":[1.0]}}'

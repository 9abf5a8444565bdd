"""An OTLP AnyValue decodes to exactly the value sent, whatever its arrays mix: the array
fast path (collector/intake/otlp.py any_value) reads elements through the first one's field
and must fall back wherever that field reads empty, and an element that holds nothing (an
empty AnyValue: a chunk without a prompt index, say) is None."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from midtrace.collector.intake.otlp import _set_any, any_value

scalars = st.one_of(st.text(max_size=5), st.booleans(), st.integers(-2**63, 2**63 - 1),
                    st.floats(allow_nan=False), st.binary(max_size=3), st.none())
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=6), max_leaves=20)


def encode(value: Any) -> AnyValue:
    """``value`` as an AnyValue, by the encoder midtrace sends and exports with."""
    into = AnyValue()
    _set_any(into, value)
    return into


def typed(value: Any) -> Any:
    """The value with each leaf's type beside it (True == 1 and 0.0 == 0 in Python)."""
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


@given(values)
@example(["a", "", 1, 0, 2.5, 0.0, True, False, b"", ["x"]])
@example([0, "", 0.0, False, 7])
@example([0.0, 1, "s"])
@example([3, None, 0, None, []])  # an element that holds nothing reads None, an empty array []
@example(["a", None, "", None])
def test_an_array_decodes_to_exactly_what_was_sent(value: Any) -> None:
    assert typed(any_value(encode(value))) == typed(value)

"""Every class given ``stored_at_once`` (schemas/frozen.py) builds exactly the object that
dataclasses' own ``__init__`` builds, from the same arguments, and stays frozen."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, date, datetime
from typing import Any

import pytest

from midtrace.collector.normalize import inferred, locate
from midtrace.schemas import model, span
from midtrace.schemas.frozen import stored_at_once

DECORATED = [cls for module in (model, span, locate, inferred) for cls in vars(module).values()
             if isinstance(cls, type) and cls.__module__ == module.__name__
             and getattr(cls.__init__, "__wrapped__", None) is not None]

SAMPLE: dict[str, Any] = {"str": "x", "int": 3, "float": 0.5, "bool": True, "date": date(2026, 1, 2),
                          "datetime": datetime(2026, 1, 2, tzinfo=UTC)}


def value_for(field: dataclasses.Field[Any]) -> Any:
    kind = str(field.type)
    for name, value in SAMPLE.items():
        if kind.startswith(name):
            return value
    return ("a", "b") if "tuple" in kind else {"k": 1} if "dict" in kind else "other"


def built_both_ways(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    fast = cls(*args, **kwargs)
    reference = object.__new__(cls)
    cls.__init__.__wrapped__(reference, *args, **kwargs)  # dataclasses' own
    return fast, reference


def test_the_hot_classes_are_decorated() -> None:
    names = {cls.__name__ for cls in DECORATED}
    assert {"Chunk", "Placement", "RagRecord", "RagRequest", "SpanRecord", "Found",
            "Document", "Ranking"} <= names


@pytest.mark.parametrize("cls", DECORATED, ids=lambda cls: cls.__name__)
def test_an_object_is_built_as_dataclasses_builds_it(cls: type) -> None:
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    every = {f.name: value_for(f) for f in fields}
    cases = [(tuple(value_for(f) for f in required), {}),  # defaults and factories
             ((), every),  # every field by keyword
             (tuple(every.values()), {})]  # every field by position
    for args, kwargs in cases:
        fast, reference = built_both_ways(cls, args, kwargs)
        assert vars(fast) == vars(reference)
        assert list(vars(fast)) == [f.name for f in fields]  # in field order, as before
        assert fast == reference and repr(fast) == repr(reference)
        assert vars(pickle.loads(pickle.dumps(fast))) == vars(fast)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(fast, fields[0].name, None)
    for f in fields:  # a default factory makes a new value for each object
        if f.default_factory is not dataclasses.MISSING:
            args = tuple(value_for(r) for r in required)
            assert getattr(cls(*args), f.name) is not getattr(cls(*args), f.name)
    with pytest.raises(TypeError):
        cls(*tuple(every.values()), None)  # one argument too many, as before


def test_what_it_does_not_cover_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Later:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Named:
        a: int

    @dataclasses.dataclass
    class Plain:
        a: int

    for cls in (Later, Named, Plain):
        with pytest.raises(TypeError):
            stored_at_once(cls)

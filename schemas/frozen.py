"""A frozen dataclass whose ``__init__`` stores its fields in one step.

dataclasses' own ``__init__`` for a frozen class sets each field with ``object.__setattr__``
(plain assignment is what ``frozen`` refuses): one call per field, 1.6 µs for a Chunk's 15.
The collector builds tens of these per request (chunks, placements, spans, documents), and
``stored_at_once`` gives such a class an ``__init__`` that builds the instance's ``__dict__``
in one call instead (0.9 µs a Chunk). The parameters, defaults and default factories are the
class's own; equality, hashing, ``repr``, ``replace`` and pickling are dataclasses' as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def stored_at_once(cls: type[T]) -> type[T]:
    """Decorate a ``@dataclass(frozen=True)`` class (put it above ``@dataclass``). A class
    this does not cover (``__post_init__``, ``__slots__``, keyword-only or ``init=False``
    fields, InitVars) is refused with a TypeError, so a change to one is not silently slower
    or different."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: stored_at_once is for frozen dataclasses")
    fields = dataclasses.fields(cls)
    own_init = cls.__init__  # type: ignore[misc]
    if (hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__
            or any(not f.init or f.kw_only or f.name.startswith("__stored_") for f in fields)
            or own_init.__code__.co_varnames[1:own_init.__code__.co_argcount]
            != tuple(f.name for f in fields)):
        raise TypeError(f"{cls.__name__}: stored_at_once covers positional fields alone")
    # the helpers' names start with __stored_ (a field named so is refused above)
    namespace: dict[str, Any] = {"__stored_set": object.__setattr__, "__stored_factory": object()}
    params, first = [], []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            namespace[f"__stored_default_{f.name}"] = f.default
            params.append(f"{f.name}=__stored_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"__stored_make_{f.name}"] = f.default_factory
            params.append(f"{f.name}=__stored_factory")
            first.append(f"    if {f.name} is __stored_factory:\n"
                         f"        {f.name} = __stored_make_{f.name}()\n")
        else:
            params.append(f.name)
    stored = ", ".join(f"{f.name!r}: {f.name}" for f in fields)
    source = (f"def __init__(self, {', '.join(params)}):\n" + "".join(first)
              + f"    __stored_set(self, '__dict__', {{{stored}}})\n")
    exec(source, namespace)  # as dataclasses makes the __init__ it replaces
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = own_init.__doc__
    init.__wrapped__ = own_init  # the original, which tests build the same objects with
    cls.__init__ = init  # type: ignore[method-assign]
    return cls

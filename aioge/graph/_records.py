"""Frozen records built often during a compile (plan steps and buffers, lowered ops)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ("dict_init",)

_T = TypeVar("_T")


def dict_init(cls: type[_T]) -> type[_T]:
    """Give the frozen dataclass ``cls`` an ``__init__`` that sets every field in one ``__dict__``
    assignment (the generated one calls ``object.__setattr__`` per field; a compile makes one such
    record per value or op).  The same parameters, in the same order, with the same defaults; a field
    with a default factory takes ``None`` for "absent" and gets a fresh value then."""
    ns: dict[str, Any] = {"_set": object.__setattr__}
    params, items = [], []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value = f.name
        if f.default is not dataclasses.MISSING:
            ns[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            ns[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=None")
            value = f"_f_{f.name}() if {f.name} is None else {f.name}"
        else:
            params.append(f.name)
        items.append(f"{f.name!r}: {value}")
    exec(f"def __init__(self, {', '.join(params)}):\n    _set(self, '__dict__', {{{', '.join(items)}}})\n", ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    setattr(cls, "__init__", init)  # noqa: B010 (mypy refuses an assignment to a method)
    return cls

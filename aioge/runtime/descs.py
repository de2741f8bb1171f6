"""Host objects a device caches for its launches: tensor descs, attrs and
prepared launches (``aclCreateTensorDesc``, ``aclopCreateAttr``,
``aiogeHostLaunchPrepare``).

ACL copies what it needs from a desc or an attr at enqueue time, so one cached
object serves every launch; the caches are bounded and cleared with the device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from .. import dtypes
from .._native import acl
from ..dtypes import ACL_CODE as _ACL_CODE

__all__ = ("Attr", "LaunchCache")

_ND = int(acl.Format.ND)
_ATTR_KINDS = ("Bool", "Int", "Float", "String", "DataType", "ListBool", "ListInt", "ListFloat", "ListString")


class _Typed(Protocol):
    """What a prepared launch reads of a tensor: its dtype and shape."""

    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def shape(self) -> tuple[int, ...]: ...


class Attr:
    """An attr value with an explicit ACL type, for when inference is ambiguous.

    Kinds: ``Bool Int Float String DataType ListBool ListInt ListFloat ListString``.

    Example:
        >>> attrs={"axes": aioge.Attr("ListInt", []), "alpha": aioge.Attr("Float", 1)}
    """

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: Any) -> None:
        if kind not in _ATTR_KINDS:
            raise ValueError(f"attr kind must be one of {_ATTR_KINDS}, got {kind!r}")
        self.kind = kind
        self.value = value


def _attr_kind(value: Any) -> tuple[str, Any]:
    """Infer the ACL attr type of a Python value; return (kind, normalised value)."""
    t = type(value)  # the exact built-in types first: already normalised, no isinstance chain
    if t is int:
        return "Int", value
    if t is float:
        return "Float", value
    if t is str:
        return "String", value
    if t is bool:
        return "Bool", value
    if t is list or t is tuple:
        if all(type(v) is int for v in value):
            return "ListInt", tuple(value)
        if all(type(v) is float for v in value):
            return "ListFloat", tuple(value)
        if all(type(v) is str for v in value):
            return "ListString", tuple(value)
    if isinstance(value, Attr):
        kind, v = value.kind, value.value
        if kind.startswith("List"):
            v = tuple(v)
        return kind, v
    if isinstance(value, (bool, np.bool_)):
        return "Bool", bool(value)
    if isinstance(value, (int, np.integer)):
        return "Int", int(value)
    if isinstance(value, (float, np.floating)):
        return "Float", float(value)
    if isinstance(value, str):
        return "String", value
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return "DataType", int(dtypes.to_acl(value))
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(value.tolist() if isinstance(value, np.ndarray) else value)
        if not items or all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in items):
            return "ListInt", tuple(int(v) for v in items)
        if all(isinstance(v, (bool, np.bool_)) for v in items):
            return "ListBool", tuple(bool(v) for v in items)
        if all(isinstance(v, (int, float, np.integer, np.floating)) for v in items):
            return "ListFloat", tuple(float(v) for v in items)
        if all(isinstance(v, str) for v in items):
            return "ListString", tuple(items)
    raise TypeError(f"cannot infer an ACL attr type for {value!r}; wrap it in aioge.Attr(kind, value)")


def _attr_key(attrs: Mapping[str, Any]) -> tuple[tuple[Any, ...], ...]:
    """The cache key of an attr set: its ``(name, kind, normalised value)`` sorted by name; the same as
    ``_attr_kind`` per value, with the exact built-in scalars and lists of ints typed inline, the rest by
    ``_attr_kind`` (one C call, ``acl.attr_key``: the common attrs need no Python call per value)."""
    return _key_of(attrs if type(attrs) is dict else dict(attrs), _attr_kind)


_key_of = acl.attr_key


class LaunchCache:
    """Per-device caches of tensor descs and attrs (host objects)."""

    MAX_DESCS = 8192
    MAX_ATTRS = 4096
    MAX_PREPARED = 4096

    def __init__(self) -> None:
        self._descs: dict[tuple[Any, ...], Any] = {}
        #: the desc dict itself, for lookups inlined in launch()
        self.desc_table = self._descs
        self._attrs: dict[Any, Any] = {}
        self._absent: Any = None
        self._null: Any = None
        self._ops: dict[str, bytes] = {}
        #: prepared launches by (op type, attr handle, dtype and shape of each input and output)
        self.prepared: dict[tuple[Any, ...], Any] = {}
        #: the attr handle of a launch without attrs (set on first use)
        self.no_attr: Any = None

    def op_name(self, op_type: str) -> bytes:
        b = self._ops.get(op_type)
        if b is None:
            b = self._ops[op_type] = op_type.encode()
        return b

    def desc(self, dt: int, shape: tuple[int, ...], fmt: int, host: bool) -> Any:
        key = (dt, shape, fmt, host)
        d = self._descs.get(key)
        if d is None:
            if len(self._descs) >= self.MAX_DESCS:
                self._clear_descs()
            d = acl.create_tensor_desc(dt, shape, fmt)
            if host:
                try:
                    acl.set_tensor_placement(d, acl.MemType.HOST)
                except BaseException:
                    acl.destroy_tensor_desc(d)
                    raise
            self._descs[key] = d
        return d

    def absent(self) -> tuple[Any, Any]:
        """The optional-input convention: UNDEFINED desc + (NULL, 0) buffer."""
        if self._absent is None:
            self._absent = acl.absent_tensor_desc()
        return self._absent, self.null_buffer()

    def null_buffer(self) -> Any:
        if self._null is None:
            self._null = acl.create_data_buffer(acl.NULL, 0)
        return self._null

    def attr(self, attrs: Mapping[str, Any] | None) -> Any:
        if not attrs:
            h = self._attrs.get(())
            if h is not None:
                return h
            key: Any = ()
        else:
            key = _attr_key(attrs)
        h = self._attrs.get(key)
        return h if h is not None else self._made(key)

    def _made(self, key: Any) -> Any:
        """The handle of an attr set not in the cache, made from its key (:func:`_attr_key`) and cached."""
        if len(self._attrs) >= self.MAX_ATTRS:
            self._clear_attrs()
        h = acl.create_attr()
        try:
            for name, kind, v in key:
                acl.set_attr(h, name, kind, v)
        except BaseException:
            acl.destroy_attr(h)
            raise
        self._attrs[key] = h
        return h

    def attrs(self, many: Sequence[Mapping[str, Any] | None]) -> list[Any]:
        """The handles of several attr sets (:meth:`attr`), all live at once: where they would overflow
        the cache, it is cleared before the first, never between them (at most :attr:`MAX_ATTRS`)."""
        if len(many) > self.MAX_ATTRS:
            raise ValueError(f"at most {self.MAX_ATTRS} attr sets at once, not {len(many)}")
        if len(self._attrs) + len(many) > self.MAX_ATTRS:
            self._clear_attrs()
        table, key_of, kind = self._attrs, _key_of, _attr_kind
        handles = []
        for a in many:  # a cache hit without a call (_made makes the missing ones, from the key)
            key = (key_of(a, kind) if type(a) is dict else _attr_key(a)) if a else ()
            h = table.get(key)
            handles.append(h if h is not None else self._made(key))
        return handles

    def prepare(self, key: tuple[Any, ...], op_type: str, inputs: Sequence[_Typed | None],
                outputs: Sequence[_Typed]) -> Any:  # fmt: skip
        """The prepared launch of ``key`` (made now: descs checked once by the runtime)."""
        codes = _ACL_CODE
        din = [self.absent()[0] if x is None else self.desc(codes[x.dtype], x.shape, _ND, False) for x in inputs]
        dout = [self.desc(codes[y.dtype], y.shape, _ND, False) for y in outputs]
        h = acl.launch_prepare(self.op_name(op_type), din, dout, op_type)
        if len(self.prepared) >= self.MAX_PREPARED:
            self._clear_prepared()
        self.prepared[key] = h
        return h

    def _clear_prepared(self) -> None:
        for h in self.prepared.values():
            acl.launch_destroy(h)  # queued launches hold their kernels themselves
        self.prepared.clear()

    def _clear_descs(self) -> None:
        for d in self._descs.values():
            acl.destroy_tensor_desc(d)
        self._descs.clear()  # the same dict object: desc_table stays valid

    def _clear_attrs(self) -> None:
        self._clear_prepared()  # their keys name attr handles
        self.no_attr = None
        for h in self._attrs.values():
            acl.destroy_attr(h)
        self._attrs.clear()

    def clear(self) -> None:
        self._clear_prepared()
        self._clear_descs()
        self._clear_attrs()
        if self._absent is not None:
            acl.destroy_tensor_desc(self._absent)
            self._absent = None
        if self._null is not None:
            acl.destroy_data_buffer(self._null)
            self._null = None

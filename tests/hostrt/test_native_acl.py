"""aioge._native.acl: its enums are the header's values, and the core calls C only through it."""

from __future__ import annotations

import re
from pathlib import Path

from aioge import dtypes
from aioge._native import acl

CORE = Path(__file__).resolve().parents[2] / "aioge"


def test_enums_match_the_public_tables() -> None:
    assert int(acl.Format.ND) == int(dtypes.Format.ND) and int(acl.Format.NCHW) == int(dtypes.Format.NCHW)
    assert int(acl.Format.UNDEFINED) == int(dtypes.Format.UNDEFINED)
    assert int(acl.DataType.UNDEFINED) == int(dtypes.DataType.UNDEFINED)
    assert [int(k) for k in acl.MemcpyKind] == [0, 1, 2, 3]
    assert int(acl.EventFlag.SYNC | acl.EventFlag.TIME_LINE) == 0x9
    assert [int(x) for x in acl.Loc] == [0, 1, 2, 3, 4]


def test_core_modules_make_no_raw_cffi_calls() -> None:
    raw = re.compile(r"\b(lib|ffi)\.[A-Za-z_]+")
    files = [*CORE.glob("*.py"), *(CORE / "runtime").glob("*.py")]
    offenders = {p.name: raw.findall(p.read_text()) for p in files}
    assert not {k: v for k, v in offenders.items() if v}, offenders


def test_the_graph_layout_places_match_the_c_header() -> None:
    from aioge.graph.executable import Loc

    assert [int(x) for x in Loc] == [int(x) for x in acl.Loc]
    assert [x.name for x in Loc] == [x.name for x in acl.Loc]

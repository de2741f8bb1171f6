"""Validation of aioge's Chrome traces (Trace Event Format), shared by the CLI and profiler tests."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

EPS = 0.0015  # us: the trace rounds times to ns


def check_trace(trace: dict[str, Any]) -> dict[str, Any]:
    """Assert the structure every aioge trace must have; return its parts for more checks.

    * well-formed events (ph, pid, tid, numeric ts/dur >= 0, names);
    * one named track (thread) per stream, in a named process per device;
    * on each track, complete events nest (never overlap partially);
    * graph nodes lie inside their segment, segments inside their execution;
    * every flow has a start and a finish, on two different tracks, bound to
      complete events there (the launch waited for, and the one that waited).
    """
    assert isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list)
    events = trace["traceEvents"]
    threads: dict[tuple[int, int], str] = {}
    procs: dict[int, str] = {}
    slices: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    flows: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for e in events:
        assert e["ph"] in ("M", "X", "s", "f"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        if e["ph"] == "M":
            if e["name"] == "thread_name":
                assert (e["pid"], e["tid"]) not in threads, f"two names for one track: {e}"
                threads[(e["pid"], e["tid"])] = e["args"]["name"]
            elif e["name"] == "process_name":
                procs[e["pid"]] = e["args"]["name"]
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        assert isinstance(e.get("name"), str) and e["name"], e
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
            slices[(e["pid"], e["tid"])].append(e)
        else:
            assert e["ph"] not in flows[e["id"]], f"flow {e['id']} has two {e['ph']} events"
            flows[e["id"]][e["ph"]] = e
    for key in slices:
        assert key in threads, f"track {key} has no name"
        assert key[0] in procs, f"process {key[0]} has no name"
    assert len(set(threads.values())) == len(threads), "two tracks with one name"
    for key, evs in slices.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict[str, Any]] = []
        for e in evs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - EPS and e["dur"] > 0:
                stack.pop()
            while stack and e["ts"] > stack[-1]["ts"] + stack[-1]["dur"] + EPS:
                stack.pop()
            if stack:
                top = stack[-1]
                assert e["ts"] + e["dur"] <= top["ts"] + top["dur"] + EPS, f"{e} overlaps {top} on track {key}"
            if e["cat"] == "node":
                assert stack and stack[-1]["cat"] == "graph", f"node outside a graph segment: {e}"
                assert stack[-1]["args"]["launch"] == e["args"]["launch"], e
            if e["cat"] == "graph" and "execution" in e["args"]:
                outer = [s for s in stack if s["cat"] == "execution"]
                if outer:
                    assert outer[-1]["args"]["execution"] == e["args"]["execution"], e
            stack.append(e)
    by_launch = {e["args"]["launch"]: e for evs in slices.values() for e in evs
                 if e["cat"] not in ("node", "execution")}  # fmt: skip
    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {fid} is missing an end: {pair}"
        s, f = pair["s"], pair["f"]
        assert (s["pid"], s["tid"]) != (f["pid"], f["tid"]), f"flow {fid} stays on one track"
        assert f.get("bp") == "e", f
        src = [e for e in slices[(s["pid"], s["tid"])] if e["ts"] - EPS <= s["ts"] <= e["ts"] + e["dur"] + EPS]
        dst = [e for e in slices[(f["pid"], f["tid"])] if e["ts"] - EPS <= f["ts"] <= e["ts"] + e["dur"] + EPS]
        assert src and dst, f"flow {fid} is not bound to slices"
    return {"threads": threads, "procs": procs, "slices": slices, "flows": flows, "launches": by_launch}

"""A timeline picture of a trace: one lane per stream (matplotlib, from the ``cli`` extra)."""

from __future__ import annotations

from typing import Any

from ._common import CliError

__all__ = ("need_matplotlib", "plot_timeline")

_KIND_COLOURS = {"kernel": "#4c72b0", "memcpy": "#17becf", "memset": "#bcbd22", "graph": "#d5dbe5",
                 "marker": "#8c8c8c"}  # fmt: skip


def need_matplotlib() -> None:
    """Fail early, in one line, when ``--plot`` cannot be honoured."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CliError("--plot needs matplotlib: pip install 'aioge[cli]'") from None


def plot_timeline(trace: dict[str, Any], path: str, *, title: str = "") -> None:
    """Draw the Chrome ``trace`` (from :meth:`aioge.Profiler.chrome_trace`) to a PNG at ``path``.

    Lanes are streams; launches are bars coloured by kind, graph nodes are
    drawn inside their segment coloured by op type, and arrows join a launch
    to the launches of other streams it waited for.
    """
    need_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    events = trace["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    lanes = sorted(names)
    row = {k: i for i, k in enumerate(lanes)}
    slices = [e for e in events if e["ph"] == "X" and (e["pid"], e["tid"]) in row]
    node_ops: dict[str, float] = {}
    for e in slices:
        if e["cat"] == "node":
            node_ops[e["name"]] = node_ops.get(e["name"], 0.0) + e["dur"]
    palette = list(matplotlib.colormaps["Dark2"].colors)  # type: ignore[attr-defined]  # apart from the kinds' colours
    top = sorted(node_ops, key=lambda k: -node_ops[k])[: len(palette)]
    op_colour = {op: palette[i] for i, op in enumerate(top)}
    fig, ax = plt.subplots(figsize=(10, 1.1 + 0.55 * max(len(lanes), 1)), dpi=100)
    t0 = min((e["ts"] for e in slices), default=0.0)
    for e in slices:
        y = row[(e["pid"], e["tid"])]
        x, w = (e["ts"] - t0) / 1e3, max(e["dur"] / 1e3, 1e-4)
        if e["cat"] == "execution":
            ax.broken_barh([(x, w)], (y - 0.45, 0.9), facecolors="none", edgecolors="#333333", linewidth=0.6)
        elif e["cat"] == "node":
            ax.broken_barh([(x, w)], (y - 0.28, 0.56), facecolors=op_colour.get(e["name"], "#bbbbbb"), linewidth=0)
        else:
            ax.broken_barh([(x, w)], (y - 0.35, 0.7), facecolors=_KIND_COLOURS.get(e["cat"], "#999999"), linewidth=0)
    flows: dict[int, dict[str, Any]] = {}
    for e in events:
        if e["ph"] in ("s", "f"):
            flows.setdefault(e["id"], {})[e["ph"]] = e
    for pair in flows.values():
        s, f = pair.get("s"), pair.get("f")
        if s is None or f is None or (s["pid"], s["tid"]) not in row or (f["pid"], f["tid"]) not in row:
            continue
        ax.annotate("", xy=((f["ts"] - t0) / 1e3, row[(f["pid"], f["tid"])]),
                    xytext=((s["ts"] - t0) / 1e3, row[(s["pid"], s["tid"])]),
                    arrowprops={"arrowstyle": "->", "color": "#c44e52", "lw": 0.5, "alpha": 0.45})  # fmt: skip
    ax.set_yticks(range(len(lanes)), [names[k] for k in lanes])
    ax.set_ylim(len(lanes) - 0.4, -0.6)
    ax.set_xlabel("ms")
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    handles = [Patch(color=c, label=k) for k, c in _KIND_COLOURS.items() if any(e["cat"] == k for e in slices)]
    handles += [Patch(color=op_colour[op], label=op) for op in top]
    if handles:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.5 if len(lanes) < 3 else -0.25),
                  ncol=min(len(handles), 8), fontsize=7, frameon=False)  # fmt: skip
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)

"""How the eval report writes a figure: percentages, Markdown tables and matplotlib plots, shared by
eval/report.py and the parts' own sections and plots."""

from __future__ import annotations

from eval import SYSTEMS

COLOURS = {name: f"C{i}" for i, name in enumerate(SYSTEMS)}  # one colour per system, in every plot


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def span(interval: tuple[float, float] | list[float] | None) -> str:
    return "" if interval is None else f"{100 * interval[0]:.1f}–{100 * interval[1]:.1f}%"


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def label_bars(ax, bars, values: list[float | None], fmt: str) -> None:
    """Print each bar's value on top of it: a bar of 0 gets its "0" (measured, not missing), a
    figure that does not exist "n/a"."""
    ax.bar_label(bars, labels=["n/a" if v is None else fmt.format(v) for v in values], padding=2, fontsize=7)

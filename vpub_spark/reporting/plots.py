"""The report's figures, drawn with matplotlib (its object API, no pyplot: the server
draws from several threads, saving one at a time) and returned as SVG data URIs, so a report is one file
that needs no network. Decisions, measured on a 2-core machine: SVG (0.07 s a figure)
rather than PNG (0.09 s), and fixed margins rather than matplotlib's constrained
layout (0.14 s a figure), since a report draws a dozen figures or more; text as SVG
text, not glyph outlines (`svg.fonttype` none: the Adult owner's page 416 -> 206 KB,
its figures 1.6-1.7 -> 1.4-1.5 s in one process), which a reader can also select and
search."""

from __future__ import annotations

import base64
import io
import threading
from collections.abc import Sequence

import numpy as np

SAVING = threading.Lock()  # one figure saved at a time: the salt is set process-wide
WIDTH, HEIGHT = 5.2, 3.0  # inches, at 100 dpi: 520 x 300 pixels
COLOURS = ("#3b6ea8", "#e08a2c")  # the source, the release


def load() -> None:
    """Import what drawing needs (about 0.4 s), e.g. while the facts are gathered."""
    import matplotlib.backends.backend_svg
    import matplotlib.figure
    import matplotlib.ticker  # noqa: F401


def _figure(
    width: float = WIDTH, height: float = HEIGHT, bottom: float = 0.17, right: float = 0.97
):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    fig.subplots_adjust(left=0.14, right=right, top=0.9, bottom=bottom)
    return fig


def _data_uri(fig) -> str:
    """The figure as an SVG data URI, the same bytes for the same figure (its element
    ids salted by a constant, not at random; no date)."""
    from matplotlib import rc_context

    buffer = io.BytesIO()
    with (
        SAVING,
        rc_context({"svg.hashsalt": "vpub", "svg.fonttype": "none"}),
    ):  # rcParams are the process's
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def counts_histogram(values: np.ndarray, title: str, xlabel: str) -> str:
    """A histogram of whole numbers (group sizes, distinct values per group): one bar
    per value when they span at most 60, else 40 bins, with a log count axis when the
    tallest bar is 100 times the shortest.

    Args:
        values: the numbers, one per group.
        title: the figure's title; xlabel: what a number is.

    Returns:
        The figure as a SVG data URI.
    """
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

    values = np.asarray(values, dtype=np.int64)
    fig = _figure()
    ax = fig.add_subplot()
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(values):
        lo, hi = int(values.min()), int(values.max())
        edges = np.arange(lo, hi + 2) - 0.5 if hi - lo <= 60 else np.linspace(lo, hi + 1, 41)
        heights, _ = np.histogram(values, bins=edges)
        shown = heights[heights > 0]
        log = bool(len(shown) and shown.max() >= 100 * shown.min())
        if log:  # labelled in plain numbers, no minor ticks: mathtext's labels cost
            ax.set_yscale("log")  # 0.3 s a figure
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _compact(v)))
            ax.yaxis.set_minor_locator(NullLocator())
        # one filled outline, not a patch per bar: a tenth of the drawing time
        ax.stairs(heights, edges, fill=True, color=COLOURS[0], baseline=0.5 if log else 0)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("groups")
    return _data_uri(fig)


def _compact(value: float) -> str:
    """A count as a short label: 1M, 250k, 40."""
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


def distribution(labels: Sequence[str], true: np.ndarray, estimate: np.ndarray, name: str) -> str:
    """One attribute's rows per value: the source's beside the release's estimate.

    Args:
        labels: the attribute's values in order; true, estimate: rows per value.
        name: the attribute.

    Returns:
        The figure as a SVG data URI.
    """
    fig = _figure(bottom=0.3)
    ax = fig.add_subplot()
    x = np.arange(len(labels))
    # side-by-side bars as two filled outlines (a value's source bar on [x - 0.4, x],
    # its estimate on [x, x + 0.4]), not a patch per bar: 0.17 s against 0.26 s a figure
    # of 74 values, 0.15 against 0.18 of 16
    for heights, left, colour, label in (
        (true, -0.4, COLOURS[0], "source"),
        (estimate, 0.0, COLOURS[1], "release (estimate)"),
    ):
        edges = np.empty(2 * len(x) + 1)
        edges[0::2], edges[1::2] = np.arange(len(x) + 1) + left, x + left + 0.4
        values = np.zeros(2 * len(x))
        values[0::2] = heights
        ax.stairs(values, edges, fill=True, color=colour, label=label)
    step = max(1, len(labels) // 20)  # at most about 20 labels under the axis
    ax.set_xticks(x[::step], [str(v)[:14] for v in labels[::step]], rotation=45, ha="right")
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title(name, fontsize=10)
    ax.set_ylabel("rows")
    ax.legend(fontsize=7)
    return _data_uri(fig)


def error_histogram(errors: np.ndarray) -> str:
    """The workload's relative errors, one per query, in 40 bins (the largest 1% in the
    last bin, so a few outliers do not flatten the rest).

    Args:
        errors: each query's |exact - estimate| / exact.

    Returns:
        The figure as a SVG data URI.
    """
    errors = np.asarray(errors, dtype=float)
    fig = _figure()
    ax = fig.add_subplot()
    if len(errors):
        top = float(np.quantile(errors, 0.99)) or 1.0
        ax.hist(np.minimum(errors, top), bins=40, range=(0.0, top), color=COLOURS[0])
        ax.axvline(float(np.median(errors)), color=COLOURS[1], label="median")
        ax.legend(fontsize=7)
    ax.set_title("relative error of the query workload", fontsize=10)
    ax.set_xlabel("|exact - estimate| / exact (the top 1% in the last bin)")
    ax.set_ylabel("queries")
    return _data_uri(fig)


def tradeoff(
    parameter: str,
    values: Sequence[int],
    error: Sequence[float],
    kl: Sequence[float],
    budget: float | None,
) -> str:
    """The privacy-utility curve of a sweep: the workload's median relative error and KL
    divergence against the privacy parameter, the budget as a line.

    Args:
        parameter: `l` or `m`; values: its values measured, in order.
        error: the median relative error at each; kl: the KL divergence at each.
        budget: the error budget, or None.

    Returns:
        The figure as a SVG data URI.
    """
    fig = _figure(7.0, 3.4, right=0.88)
    ax = fig.add_subplot()
    ax.plot(values, error, "o-", color=COLOURS[0], label="median relative error")
    if budget is not None:
        ax.axhline(budget, color="#999999", linestyle="--", label=f"budget {budget:g}")
    ax.set_xlabel(f"{parameter} (more privacy to the right)")
    ax.set_ylabel("median relative error")
    ax.set_xticks(list(values))
    right = ax.twinx()
    right.plot(values, kl, "s:", color=COLOURS[1], label="KL divergence")
    right.set_ylabel("KL divergence (nats)")
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="upper left")
    ax.set_title(f"privacy against utility as {parameter} grows", fontsize=10)
    return _data_uri(fig)

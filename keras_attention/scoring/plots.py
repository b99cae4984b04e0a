"""Figures of a trained model: attention weights as heatmaps, scores as lines.

matplotlib is imported when a figure is drawn (install the `tensorflow` extra:
`pip install keras-seq2seq-attention[tensorflow]`), in its non-interactive
backend; each function writes one PNG and closes its figure.
"""

import os

import numpy as np


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "keras_attention.scoring.plots draws with matplotlib, which is not installed: "
            "pip install 'keras-seq2seq-attention[tensorflow]' (or matplotlib)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, plt, path, dpi):
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def plot_alignments(
    path, panels, title=None, cmap="Greys", dpi=110, xlabel=None, ylabel=None, cell_inches=None
):
    """Attention weights, one heatmap per panel side by side, saved as a PNG.

    Args:
        path: the PNG file (its folder is created).
        panels: a list of `(weights, source_labels, output_labels, panel_title)`:
            `weights` (T_out, T_src) in [0, 1], e.g. a row of the `"attention"`
            of `Seq2SeqGenerator.greedy` cut to the output's length; the labels
            name its columns and rows.
        title: the figure's title, or None.
        cmap: a matplotlib colormap (0 light, 1 dark with "Greys").
        dpi: the PNG's resolution.
        xlabel: the name of each panel's columns (e.g. "source subwords"), or None.
        ylabel: the name of each panel's rows, or None.
        cell_inches: None for panels of a fixed size (3.2 by 3.4 inches), or
            the size of one weight's cell: a panel of `T_out` by `T_src`
            weights is then `1.2 + cell_inches · T_src` inches wide and
            `1.2 + cell_inches · T_out` tall, for a long sentence's labels.
            Source labels longer than two characters are written upright.

    Raises:
        ValueError: a panel's weights are not 2-D or do not match its labels.
    """
    if not panels:
        raise ValueError("Invalid value for argument `panels`. Expected at least one panel.")
    for i, (weights, source_labels, output_labels, _) in enumerate(panels):
        shape = np.shape(weights)
        if shape != (len(output_labels), len(source_labels)):
            raise ValueError(
                f"Invalid value for argument `panels`: panel {i} has weights of shape "
                f"{shape}, expected (T_out, T_src) = ({len(output_labels)}, "
                f"{len(source_labels)}) from its labels"
            )
    plt = _pyplot()
    if cell_inches is None:
        width, height = 3.2 * len(panels), 3.4
    else:
        width = sum(1.2 + cell_inches * len(p[1]) for p in panels)
        height = max(1.2 + cell_inches * len(p[2]) for p in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(width, height))
    for ax, (weights, source_labels, output_labels, panel_title) in zip(
        np.atleast_1d(axes), panels, strict=True
    ):
        ax.imshow(np.asarray(weights), cmap=cmap, vmin=0, vmax=1, aspect="auto")
        upright = max((len(str(label)) for label in source_labels), default=0) > 2
        ax.set_xticks(range(len(source_labels)), list(source_labels), rotation=90 if upright else 0)
        ax.set_yticks(range(len(output_labels)), list(output_labels), fontsize=8)
        if xlabel:
            ax.set_xlabel(xlabel)
        if ylabel:
            ax.set_ylabel(ylabel)
        if panel_title:
            ax.set_title(panel_title, fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, plt, path, dpi)


def plot_lines(path, series, xlabel, ylabel, title=None, dpi=120):
    """One line per series over the same categories (e.g. length buckets).

    Args:
        path: the PNG file (its folder is created).
        series: `{label: (x_labels, values)}`, drawn in order with markers.
        xlabel: the horizontal axis' name.
        ylabel: the vertical axis' name.
        title: the figure's title, or None.
        dpi: the PNG's resolution.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for label, (x_labels, values) in series.items():
        ax.plot(list(x_labels), list(values), marker="o", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    _save(fig, plt, path, dpi)

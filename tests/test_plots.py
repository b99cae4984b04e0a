"""`keras_attention.scoring.plots`: a heatmap sized from its labels, and the
translator's figures drawn through it."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")

from keras_attention.scoring.plots import plot_alignments  # noqa: E402


def _size(path):
    with Image.open(path) as image:
        return image.size


def test_cell_inches_sizes_a_panel_from_its_labels(tmp_path):
    source = [f"w{i}" for i in range(10)]
    output = ["a", "b", "c", "d"]
    weights = np.full((4, 10), 0.1)
    path = tmp_path / "one.png"
    plot_alignments(str(path), [(weights, source, output, "")], dpi=100, cell_inches=0.35)
    # (1.2 + 0.35 · 10) by (1.2 + 0.35 · 4) inches at 100 dots per inch.
    assert _size(path) == (470, 260)


def test_panels_side_by_side_add_their_widths_and_take_the_tallest(tmp_path):
    panels = [
        (np.eye(2), ["A", "B"], ["x", "y"], "AB"),
        (np.full((6, 4), 0.25), list("ABCD"), list("uvwxyz"), "ABCD"),
    ]
    path = tmp_path / "two.png"
    plot_alignments(str(path), panels, dpi=100, cell_inches=0.5)
    # widths (1.2 + 1.0) + (1.2 + 2.0), height 1.2 + 0.5 · 6.
    assert _size(path) == (540, 420)


def test_without_cell_inches_each_panel_has_the_fixed_size(tmp_path):
    panels = [(np.eye(3), list("ABC"), list("xyz"), "")] * 2
    path = tmp_path / "fixed.png"
    plot_alignments(str(path), panels, dpi=100)
    assert _size(path) == (640, 340)


def test_bleu_by_length_plot_draws_each_model_as_a_line(tmp_path):
    pytest.importorskip("tensorflow")
    from keras_attention.translation import evaluation

    curves = {
        "bahdanau attention": [(1, 10, 100, 40.0), (11, 20, 80, 30.0)],
        "no attention": [(1, 10, 100, 30.0), (11, 20, 80, 15.0)],
    }
    path = tmp_path / "bleu.png"
    evaluation.plot_bleu_by_length(curves, path, title="BLEU by source length, test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""Attention heat maps drawn with matplotlib (the `report` extra, imported only when one is drawn): the
labelled panel of the report's figure, and the same panel as pixels for TensorBoard.

No TensorFlow or Keras here, so the report's figures draw without loading them; the attention itself
is computed by `bert4rec_tf.evaluation.attention`.
"""

from __future__ import annotations

import numpy as np


def pyplot():
    """`matplotlib.pyplot` on the file-only Agg backend.

    Raises:
        ImportError: naming the `report` extra when matplotlib is not installed.
    """
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError("the report's figures need matplotlib: pip install -e \".[report]\"") from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def attention_panel(figure, axis, matrix: np.ndarray, title: str, last_label: str = "[mask]",
                    query_label: bool = True) -> None:
    """Draws one head's heat map on `axis`: rows queries, columns keys, the window's last position named
    `last_label`, earlier ones by their offset from it (-1, -2, ...), with a colour bar.

    Args:
        figure: the matplotlib figure that holds `axis` (for the colour bar).
        axis: the matplotlib axes to draw on.
        matrix: float [last, last] attention among the window's positions (rows queries).
        title: the panel's title.
        last_label: the name of the window's last position ("[mask]" for the Cloze models).
        query_label: whether to name the rows' axis (the first panel of a row of panels).
    """
    last = len(matrix)
    labels = [str(i - last + 1) for i in range(last - 1)] + [last_label]
    image = axis.imshow(matrix, cmap="viridis", vmin=0)
    axis.set_title(title)
    axis.set_xticks(range(last), labels, fontsize=7, rotation=90)
    axis.set_yticks(range(last), labels, fontsize=7)
    axis.set_xlabel("key position")
    if query_label:
        axis.set_ylabel("query position")
    figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)


def attention_head_pixels(matrix: np.ndarray, title: str, last_label: str = "[mask]", dpi: int = 100) -> np.ndarray:
    """One head's heat map drawn as in the report's figure (`attention_panel`: axes, position labels,
    colour bar), as uint8 pixels [1, height, width, 3] for a TensorBoard image summary.

    Args:
        matrix: float [last, last] attention among the window's positions (rows queries).
        title: the panel's title.
        last_label: the name of the window's last position ("[mask]" for the Cloze models).
        dpi: pixels per inch of the 4.6 x 4 inch figure.

    Raises:
        ImportError: when matplotlib is not installed.
    """
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(4.6, 4.0), dpi=dpi, layout="constrained")
    try:
        attention_panel(figure, axis, matrix, title, last_label)
        figure.canvas.draw()
        return np.asarray(figure.canvas.buffer_rgba())[None, :, :, :3].copy()  # [1, height, width, 3]
    finally:
        plt.close(figure)

"""A matplotlib figure for a notebook, shown once: where a cell displays or returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt


def figure(width: float, height: float, rows: int = 1, cols: int = 1):
    """A figure that is shown only where it is displayed or returned (closed in pyplot, so Jupyter's
    inline backend does not show it a second time at the end of the cell)."""
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    plt.close(fig)
    return fig, axes

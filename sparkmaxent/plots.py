"""PNG figures of runs (selection traces, paths, lattices), drawn with
matplotlib when the ``plots`` extra is installed and written through the
storage layer, so plots land on any file system the run writes to."""

from __future__ import annotations

import io
import logging

from . import storage

log = logging.getLogger(__name__)


def new_figure(what: str, width: float = 10, height: float = 4):
    """A matplotlib ``Figure`` (Agg canvas), or None with one log line when
    matplotlib is not installed; ``what`` names the skipped plot."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        log.info("matplotlib is not installed: no %s (pip install 'sparkmaxent[plots]')", what)
        return None
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def save_png(fig, path: str) -> str:
    """``fig`` laid out, rendered in memory and written to ``path`` through
    storage; returns ``path``."""
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=90)
    storage.write_bytes(path, png.getvalue())
    return path

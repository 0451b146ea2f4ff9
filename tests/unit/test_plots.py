"""sparkmaxent.plots: figures written through storage, skipped without matplotlib."""

from __future__ import annotations

import logging
import sys

import pytest

from sparkmaxent.plots import new_figure, save_png
from sparkmaxent.selection.base import RoundRecord
from sparkmaxent.selection.reporting import write_plots

pytest.importorskip("matplotlib")


def test_save_png_writes_a_png(tmp_path):
    fig = new_figure("test plot")
    fig.add_subplot(1, 1, 1).plot([0, 1], [1, 0])
    path = str(tmp_path / "sub" / "p.png")
    assert save_png(fig, path) == path
    assert (tmp_path / "sub" / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_matplotlib_no_figure_and_one_log_line(monkeypatch, caplog, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import raises ImportError
    with caplog.at_level(logging.INFO, logger="sparkmaxent.plots"):
        assert new_figure("path plot") is None
        trace = [RoundRecord(1, 3, 3, 0, 1.0, "max_gradient", 0.5)]
        assert write_plots(trace, str(tmp_path)) == []
    assert [r.getMessage() for r in caplog.records] == [
        "matplotlib is not installed: no path plot (pip install 'sparkmaxent[plots]')",
        "matplotlib is not installed: no plots (pip install 'sparkmaxent[plots]')",
    ]
    assert list(tmp_path.iterdir()) == []

"""The lattice run's curves as a PNG: held-out log-likelihood per selection
step against the optimized lattice's size, and held-out loss per
generalization round against the number of constraints."""

from __future__ import annotations

from ...plots import new_figure, save_png


def write_plot(report: dict, path: str) -> str | None:
    """``path`` (a PNG) drawn from a lattice report's ``selection`` and
    ``generalization`` traces; None without matplotlib (the plots extra)."""
    fig = new_figure("lattice plot")
    if fig is None:
        return None
    sel, gen = report["selection"]["trace"], report["generalization"]["trace"]
    a, b = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    a.plot([r["optimized_nodes"] for r in sel], [r["heldout_ll"] for r in sel], marker=".")
    a.axvline(sel[report["selection"]["best_step"]]["optimized_nodes"], color="grey", ls=":")
    a.set_xlabel("optimized lattice nodes")
    a.set_ylabel("held-out log-likelihood per event (p'')")
    a.set_title("selection (section 3)")
    b.plot([r["constraints"] for r in gen], [r["heldout_loss"] for r in gen], marker=".")
    b.axvline(gen[report["generalization"]["best_round"]]["constraints"], color="grey", ls=":")
    b.set_xlabel("constraints")
    b.set_ylabel("held-out loss (maxent model)")
    b.set_title("generalization (section 4)")
    b.invert_xaxis()
    for ax in (a, b):
        ax.grid(True, alpha=0.3)
    return save_png(fig, path)

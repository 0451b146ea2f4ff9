"""The settings of every solver, in one class: the shared stop (``tol``,
``max_iter``), then what only L-BFGS-B or only Newton reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SolverOptions:
    """Settings of the solvers (``lbfgs.py``, ``newton.py``, ``box_qp.py``).

    Shared:

    tol : stop when the projected gradient's largest entry is <= tol
        (L-BFGS-B: its ``gtol``).
    max_iter : at most this many iterations (Newton or L-BFGS-B).

    L-BFGS-B:

    memory : history length (``maxcor``).
    ftol : relative-decrease stop.
    max_evaluations : at most about this many evaluations (``maxfun``;
        checked between iterations); 0: no cap beyond ``max_iter``.

    Newton (``minimize_box_newton``):

    inner_ratio : coordinate descent stops when the model's projected
        gradient is below inner_ratio times the outer one (or below tol / 10).
    max_sweeps : at most this many coordinate-descent sweeps per iteration.
    armijo : sufficient-decrease constant sigma of the line search.
    backtrack : step shrink factor of the line search.
    max_backtracks : line-search trials before giving up.
    ray_steps : cut steps tried per ray pass (the first 8 reach 1/256).
    radius : initial trust-region radius (infinity norm of a step).
    region : the trust region bounds theta[:region] (None: all of theta);
        grafting leaves its unpenalized biases out (``Grafting.grow``).
    min_radius : give up (line search failed) below this radius.
    stall : stop (not converged) after this many iterations in a row that
        lower neither the objective beyond its rounding nor the projected
        gradient's best value by 1%.
    forcing_max : the Hessian-free step's partitions solve their model to
        the outer violation times its last contraction, clipped to
        [inner_ratio, forcing_max] (``newton.forcing``; Eisenstat & Walker
        1996); the exact step's model solve to inner_ratio times it.
    forcing_blocks : where the last direction pass averaged the steps of
        several blocks solved by the face model (``cg_face``), the forcing
        term is at least this (``newton.forcing``):
        each block's CG stops at this fraction of the outer violation, before
        it runs far along directions only its own Hessian is flat in. One
        block's step (the exact Newton step) keeps ``inner_ratio``.
    forcing_floor : the Hessian-free step's partitions never solve their model
        below this fraction of ``tol`` (the solve's own tolerance: a round's),
        whatever the forcing term asks (``newton.forcing``; Kelley 1995,
        section 6.3, safeguards the forcing term the same way with 0.5).
        The outer violation after a step is about the model's, so a solve
        far below ``tol`` oversolves a round's last iteration; 0.1 (the
        default) is the floor of before, 0.7 keeps that iteration's solve
        near ``tol``.
    max_products : the Hessian-free step (``newton-cg``): at most this many
        Hessian-vector products per block and direction pass.
    cg_through : the blocks' projected CG runs on through the box to its
        tolerance before the step is projected (``kernels.direction.box_qp_pcg``);
        off (the default): it stops at the first bound its step crosses, which
        restarts after a product or two where many free weights sit at a
        bound (an l1 round's orthant bounds at 0). Off by default: on the
        rounds measured its late iterations gained less for their products
        (benchmarks/round_cost.py ``--through``).
    cg_face : the blocks solve their model face by face, after TRON (Lin &
        More 1999; ``kernels.box_face.box_qp_face``): CG on every weight but
        those a bound holds (at their orthant's 0 with a gradient that keeps
        them there), run to its tolerance through the bounds, then a
        projected search along its step (a Cauchy step where it gains
        nothing); a bound never restarts CG. With it a very successful full
        step keeps its trust region (TRON's update,
        ``line_search.next_radius``). Takes precedence over ``cg_through``.
        None (the default): automatic, on from ``face_from`` parameters of a
        round. It needs far fewer products where the stop-at-bound CG runs
        into ``max_products`` (a large round's late iterations), and more on
        a small round, whose stop-at-bound CG seldom reaches the cap
        (benchmarks/round_cost.py ``--face``).
    face_from : with ``cg_face`` None, the Hessian-free step solves face by
        face on rounds of at least this many parameters (active weights and
        biases), with the stop-at-bound CG below: chosen from the
        round_cost page's rows of both at 1,000, 4,000 and 16,000 weights
        (docs/methods/grafting.md says how).
    trial_points : the Hessian-free step's line search evaluates its first
        this many steps (1, backtrack, ...) with their gradients in one pass.
    secant_memory : the Hessian-free step is corrected by the L-BFGS
        two-loop over this many pairs of its last steps on an unchanged face
        (``secant.py``); 0: the direction pass's step as it is.
    secant_across : the pairs are kept when the face changes, each over the
        coordinates free at both ends of its step, the two-loop over the pairs
        restricted to the current face (OWL-QN's and L-BFGS-B's memory;
        ``secant.py``); off: a changed face starts the memory over, which in
        an l1 round, where weights reach 0 one after another, leaves it empty.
        A corrected step's length is the pairs', not the model's: it neither
        shrinks the trust region when taken whole, nor is the region cut to
        it when the line search cuts it (the pairs are dropped instead).
    global_cg : the Hessian-free step's late iterations (the free set the
        same as at the last iteration) solve the model by CG on the whole
        data's Hessian-vector products, one pass each, at most this many
        per iteration (``global_cg.py``); 0: each partition's local CG
        throughout.
    crawl_cg : once the partitions' averaged step has twice been cut by the
        line search after their CG ran into ``max_products`` (a round that
        crawls), the rest of the round's steps are the whole data's, by face
        CG across product passes, at most this many per iteration
        (``global_cg.py``); 0: never (the default here; grafting's rounds
        take ``train.grafting.round_crawl_cg``).
    full_gradient : Newton's last pass may bring the gradient over every
        candidate (the next gradient test); off when that gradient is too
        large for the driver (the block-wise test, kernels/topk.py).
    """

    tol: float = 1e-7
    max_iter: int = 1000
    memory: int = 10
    ftol: float = 1e-12
    max_evaluations: int = 0
    inner_ratio: float = 0.1
    max_sweeps: int = 500
    armijo: float = 1e-4
    backtrack: float = 0.5
    max_backtracks: int = 30
    ray_steps: int = 8
    radius: float = np.inf
    region: int | None = None
    min_radius: float = 1e-12
    stall: int = 10
    forcing_max: float = 0.5
    forcing_blocks: float = 0.5
    forcing_floor: float = 0.1
    max_products: int = 200
    cg_through: bool = False
    cg_face: bool | None = None
    face_from: int = 2000
    trial_points: int = 3
    secant_memory: int = 5
    secant_across: bool = False
    global_cg: int = 0
    crawl_cg: int = 0
    full_gradient: bool = True


__all__ = ["SolverOptions"]

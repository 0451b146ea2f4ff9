"""The line search and trust region of the box Newton solvers
(``newton.py``): Armijo's test with the objective's rounding noise, the
backtracking over 1, b, b^2, ... by trial passes, ray passes (values only)
or one points pass (several trial steps with their gradients), and the
trust-region radius after an accepted step."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..problem.objective import Evaluation

#: rho of a full step at or above which the region it was taken in is kept
#: (``next_radius``; TRON's eta2, Lin & More 1999)
KEEP_RHO = 0.75

#: a points pass: the evaluations (value and gradient) at several thetas at once
Points = Callable[[list[np.ndarray]], list[Evaluation]]


def acceptance(
    value: float, slope: float, armijo: float
) -> tuple[Callable[[float, float], bool], float]:
    """Armijo's sufficient-decrease test from phi = ``value`` along a
    direction of ``slope``, and the rounding noise of ``value``.

    Near the optimum the decrease slope * step falls below the rounding
    error of the objective (a sum over all events) and Armijo's test
    compares noise; a step that keeps the value within that rounding is then
    accepted, and progress is judged by the projected gradient.
    """
    noise = float(64 * np.finfo(float).eps * max(1.0, abs(value)))

    def acceptable(step: float, value_t: float) -> bool:
        return bool(np.isfinite(value_t)) and (
            value_t <= value + armijo * step * slope
            or (-slope * step <= noise and value_t <= value + noise)
        )

    return acceptable, noise


def line_search(
    at: Callable,
    along: Callable | None,
    theta: np.ndarray,
    d: np.ndarray,
    l1_per_weight: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    steps: np.ndarray,
    acceptable: Callable[[float, float], bool],
    want_full: bool,
    ray_first: bool,
    ray_steps: int,
    points: Points | None = None,
    n_points: int = 1,
) -> tuple[tuple | None, float]:
    """Backtracking along d over ``steps`` (1, b, b^2, ...): the accepted
    (theta, evaluation, phi) and its step, or (None, the last step tried).

    The full step first, with the Hessian the next iteration needs; without a
    ray pass each cut step is a pass of its own. With one, the cut steps go
    ``ray_steps`` per pass (each costs a log-sum-exp over every event), then
    one curvature pass at the largest acceptable one; with ``ray_first`` the
    ray pass tries the full step too (2 passes and one Hessian instead of 3
    and two when it is cut, but 2 instead of one when it is taken). With a
    ``points`` pass (the Hessian-free solver: no Hessian to bring) the first
    ``n_points`` steps go in one pass with their gradients, so a cut step
    costs no pass of its own; the ray goes on beyond them. Not when the pass
    brings the full gradient (``want_full``): that is one point's.
    """
    first = 0
    if points is not None and not want_full:
        chunk = steps[:n_points]
        trials = [np.clip(theta + t * d, lower, upper) for t in chunk]
        for t, trial, ev_t in zip(chunk, trials, points(trials)):
            value_t = ev_t.value + float(l1_per_weight @ trial)
            if acceptable(float(t), value_t):
                return (trial, ev_t, value_t), float(t)
        first, ray_first = len(chunk), along is not None
    step = float(steps[min(first, len(steps) - 1)])
    tries: np.ndarray = steps[:0] if ray_first else steps[first:] if along is None else steps[:1]
    for step in tries:
        trial = np.clip(theta + step * d, lower, upper)
        ev_t = at(trial, want_full, step == 1.0)
        value_t = ev_t.value + float(l1_per_weight @ trial)
        if acceptable(step, value_t):
            return (trial, ev_t, value_t), step
    if along is None:
        return None, step
    for k in range(first if ray_first else 1, len(steps), ray_steps):
        chunk = steps[k : k + ray_steps]
        values = (
            along(theta, d, chunk) + float(l1_per_weight @ theta) + chunk * float(l1_per_weight @ d)
        )
        ok = [acceptable(t, v) for t, v in zip(chunk, values)]
        if any(ok):
            step = float(chunk[ok.index(True)])
            trial = np.clip(theta + step * d, lower, upper)
            ev_t = at(trial, want_full, True)
            return (trial, ev_t, ev_t.value + float(l1_per_weight @ trial)), step
    return None, step


def next_radius(
    step: float,
    length: float,
    slope: float,
    curvature: float,
    value: float,
    value_t: float,
    noise: float,
    kept: float | None = None,
) -> tuple[float, float | None]:
    """The trust region after an accepted step, and rho for a full one.

    The region follows the line search: the length a cut step reached; after
    a full step, twice its length when the quadratic model predicted at least
    half of the decrease (rho, actual over predicted decrease, as in trust-
    region methods; Nocedal & Wright, Algorithm 4.1), else its length.

    ``kept``: the region the step was taken in, which a full step with rho
    >= ``KEEP_RHO`` never shrinks (TRON's update, Lin & More 1999, section
    2: for rho >= eta2 the next radius lies in [Delta, sigma3 Delta]). A
    step shorter than its region because the inexact model solve ended
    early (a forcing term of up to ``forcing_max``) says nothing about where
    the model stops being good; following its length instead shrinks the
    region to the step's size, and regrowing it by doublings takes as many
    iterations again (and the face model's CG, whose Steihaug radius the
    region is, restarts at it every few products).
    """
    if step < 1:
        return step * length, None
    predicted = -(slope + curvature / 2)
    ratio = (value - value_t) / predicted if predicted > noise else 1.0
    radius = (2 if ratio >= 0.5 else 1) * length
    if kept is not None and ratio >= KEEP_RHO:
        radius = max(radius, kept)
    return radius, ratio


def expects_cut(ratio: float | None, ray: Callable | None) -> bool:
    """Whether the full step is likely to be cut, so the ray pass tries it:
    after a full step whose decrease the model overestimated (rho < 0.85)."""
    return ray is not None and ratio is not None and ratio < 0.85

"""IFS and SGC (methods/ifs.py) in-process: SGC against IFS on generated
data, gain evaluations per stage, the loss bookkeeping, look-ahead,
re-estimation, both event shapes, real values, progress lines and resume.

That the gains themselves equal brute force is tests/unit/test_gains.py.
"""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import pytest
import scipy.sparse as sp

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import TrainConfig, train_config
from sparkmaxent.data import synthetic
from sparkmaxent.kernels import CANDIDATES, MULTICLASS, CandidateBlock, Space
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.kernels.loss import loss_grad
from sparkmaxent.methods.ifs import compare_selections
from sparkmaxent.methods.round_details import IfsStage
from sparkmaxent.problem import Objective
from sparkmaxent.solvers.gain_fits import fit_gains
from sparkmaxent.train import METHODS, train

from .helpers import interrupt_and_resume, random_multiclass

log = logging.getLogger(__name__)

SPEC = synthetic.SyntheticSpec(
    n_events=3000,
    n_predicates=1000,
    n_labels=4,
    active_per_event=3,
    n_support=20,
    weight_scale=1.0,
    n_copies=0,
    n_conjunctions=0,
    min_support_count=40,
    seed=3,
)


@pytest.fixture(scope="module")
def generated():
    block = synthetic.generate(SPEC).block()
    return block, Space(MULTICLASS, SPEC.n_predicates, SPEC.n_labels, bias=True)


def config(method, **kw) -> TrainConfig:
    # the papers: plain gains and one feature per stage, unless a test asks otherwise
    base = dict(
        method=method,
        stage_features=1,
        max_features=40,
        gain_threshold=0.0,
        batch=16,
        lookahead=24,
        plots=False,
        gain_prior_variance=0.0,
    )
    base.update(kw)
    return train_config(**base)


def run(block, space, method, blocks=2, **kw):
    return train(LocalBackend(split_block(block, blocks), space), config(method, **kw))


@pytest.fixture(scope="module")
def runs(generated):
    block, space = generated
    out = {}
    for method in ("ifs", "sgc", "sgc-lookahead"):
        captured = {}

        def keep(state, captured=captured):
            captured[state.round] = {k: v.copy() for k, v in state.arrays.items()}

        res = train(
            LocalBackend(split_block(block, 2), space),
            config(method),
            output_dir=None,
            on_round=keep,
        )
        out[method] = (res, captured)
    return out


def stage(row) -> IfsStage:
    """A stage's own entries (its picks, gain evaluations, refit)."""
    return row.detail_as(IfsStage)


def trace(rows) -> list[dict]:
    """Stage rows as the report's JSON trace, which ``compare_selections``
    reads (as the sgc_vs_ifs benchmark does from its saved traces)."""
    return [r.to_json() for r in rows]


def loss_at(block, space, weights) -> float:
    lg = loss_grad(block, space, weights)
    return lg.loss / lg.weight


# ---- SGC against IFS --------------------------------------------------------------


@pytest.mark.parametrize("method", ["sgc", "sgc-lookahead"])
def test_sgc_selects_what_ifs_selects_until_a_gain_grows(generated, runs, method):
    """SGC takes a stale gain as an upper bound (Zhou et al. section 3). It
    picks IFS's feature at every stage until the gain of IFS's pick has grown
    past SGC's pick since SGC last computed it: that is the only way they can
    part, and this data keeps them together for 24 stages."""
    block, space = generated
    ifs, sgc = runs["ifs"][0].report.rounds, runs[method][0].report.rounds
    assert len(ifs) == len(sgc) == 40
    d = compare_selections(trace(ifs), trace(sgc))
    assert d.agree >= 24 and not d.ties
    for x, y in zip(ifs[: d.agree], sgc[: d.agree]):
        assert stage(y).best.gain == pytest.approx(stage(x).best.gain, rel=1e-9)
        assert stage(y).best.alpha == pytest.approx(stage(x).best.alpha, rel=1e-6, abs=1e-9)
    if d.stage:
        f_ifs, f_sgc = d.features
        g_ifs, g_sgc = d.gains
        assert g_ifs > g_sgc * (1 + 1e-12)
        stale = runs[method][1][d.stage - 1]["gain"][f_ifs]  # SGC's view before the stage
        assert stale < g_sgc < g_ifs  # its gain grew after it was last computed


def test_sgc_computes_far_fewer_gains_than_ifs(runs):
    ifs, sgc = runs["ifs"][0].report, runs["sgc"][0].report
    n = ifs["candidates"]
    # IFS fits every remaining candidate at every stage
    assert [stage(r).gain_evaluations for r in ifs.rounds] == [n - s for s in range(40)]
    # SGC: closed-form start (no fit at stage 1), then a batch or two per stage
    ev = [stage(r).gain_evaluations for r in sgc.rounds]
    assert ev[0] == 0 and all(e % 16 == 0 for e in ev)
    assert sgc["mean_gain_evaluations_per_stage"] < ifs["mean_gain_evaluations_per_stage"] / 50
    look = [stage(r).gain_evaluations for r in runs["sgc-lookahead"][0].report.rounds]
    assert all(e >= 24 for e in look)  # every stage refreshes the next 24


def test_sgc_batches_grow_within_a_stage_and_keep_its_rule(generated):
    """A stage that one batch does not settle recomputes batch_growth times
    as many gains next (train.ifs.batch_growth): fewer batches (2 passes
    each) than with fixed batches, and every selected feature's fresh gain
    is still at least every stale gain left."""
    block, space = generated
    runs = {}
    for growth in (1, 2):
        captured = {}

        def keep(state, captured=captured):
            captured[state.round] = {k: v.copy() for k, v in state.arrays.items()}

        cfg = config("sgc", batch=2, batch_growth=growth, max_features=30)
        res = train(LocalBackend(split_block(block, 2), space), cfg, on_round=keep)
        runs[growth] = (res.report, captured)
    fixed, grown = runs[1][0], runs[2][0]
    batches = {g: [stage(r).batches for r in runs[g][0].rounds] for g in runs}
    assert max(batches[1]) >= 3, "a stage that fixed batches of 2 do not settle at once"
    assert all(stage(r).gain_evaluations % 2 == 0 for r in fixed.rounds)
    assert sum(batches[2]) < sum(batches[1])
    assert grown.passes < fixed.passes
    for report, captured in runs.values():
        for r in report.rounds:
            arrays = captured[r.round]
            stale = (arrays["at"] > 0) & (arrays["at"] != r.round)
            assert stage(r).best.gain >= arrays["gain"][stale].max(initial=-np.inf)
            assert arrays["batch_size"][0] >= 2
    # fixed batches stay at train.ifs.batch
    assert all(a["batch_size"][0] == 2 for a in runs[1][1].values())


def test_objective_is_the_loss_and_falls_by_each_gain(generated, runs):
    """Only the new weight changes, and G is exact at its alpha, so the loss
    after a stage is the loss before it minus the stage's gain."""
    block, space = generated
    for method in ("ifs", "sgc"):
        res = runs[method][0]
        rounds = res.report.rounds
        assert res.report.objective == pytest.approx(loss_at(block, space, res.weights), rel=1e-10)
        objectives = [r.objective for r in rounds]
        for prev, r in zip(objectives, rounds[1:]):
            assert r.objective == pytest.approx(prev - stage(r).best.gain, rel=1e-12)
        assert len(res.weights.ids) == 40
        # the bias is the bias-only maximum-likelihood model's, never re-fitted
        w_k = np.bincount(block.y, weights=block.c, minlength=space.n_labels)
        np.testing.assert_allclose(res.weights.bias, np.log(w_k / w_k.sum()), rtol=1e-12)


# ---- stopping, re-estimation, configuration ------------------------------------


def test_threshold_stops_and_reports_why(generated):
    block, space = generated
    res = run(block, space, "sgc", max_features=0, gain_threshold=2e-3)
    gains = [stage(r).best.gain for r in res.report.rounds]
    assert 5 <= len(gains) < 40 and min(gains) > 2e-3
    assert "gain_threshold" in res.report.stop.message
    # IFS agrees on where to stop (the top of the ranking is the same here)
    ifs = run(block, space, "ifs", max_features=0, gain_threshold=2e-3)
    assert ifs.report["selected"] == res.report["selected"]
    # a fresh fit at the final model finds no candidate above the threshold
    ids = np.setdiff1d(np.arange(space.n_features), res.weights.ids)
    fit = fit_gains(LocalBackend([block], space), res.weights, ids)
    assert fit.gain.max() <= 2e-3 * (1 + 1e-9)


def test_reestimation_every_r_stages_and_at_the_end(generated):
    block, space = generated
    res = run(block, space, "sgc", max_features=7, reestimate_every=3, l2=1e-4)
    flags = [stage(r).reestimated for r in res.report.rounds]
    assert flags == [False, False, True, False, False, True, False]
    assert res.report["final_reestimate"]
    w = res.weights
    obj = Objective(LocalBackend([block], space), w.ids, l2=1e-4)
    ev = obj.at(np.concatenate([w.values, w.bias]), full_gradient=False, hessian=False)
    assert np.abs(ev.grad).max() < 1e-6  # stationary over the selected weights and bias
    plain = run(block, space, "sgc", max_features=7)
    assert res.report["loss"] < plain.report["loss"]


def test_methods_are_registered_and_bad_settings_fail_before_training(generated):
    assert {"ifs", "sgc", "sgc-lookahead"} <= set(METHODS)
    block, space = generated
    backend = LocalBackend([block], space)
    for kw, match in (
        (dict(batch=0), "train.ifs.batch: expected a value >= 1"),
        (dict(gain_threshold=-1.0), "train.ifs.gain_threshold: expected a value >= 0"),
        (dict(gain_method="newton"), "train.selection.gain_method"),
        (dict(max_features=-2), "train.selection.max_features: expected a value >= 0"),
    ):
        with pytest.raises(ValueError, match=match):
            train(backend, config("sgc", **kw))
    assert backend.passes == 0


def test_progress_lines_name_the_feature_gain_alpha_and_evaluations(generated, caplog):
    block, space = generated
    with caplog.at_level("INFO", logger="sparkmaxent.selection.loop"):
        res = run(block, space, "sgc", max_features=3)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("round ")]
    p, k = divmod(stage(res.report.rounds[0]).best.feature, space.n_labels)
    assert f"selected {p}|{k} gain " in lines[0] and "alpha" in lines[0]
    assert "gain evaluations" in lines[1] and "passes" in lines[1]
    for key in (
        "feature",
        "feature_name",
        "gain",
        "alpha",
        "gain_evaluations",
        "passes",
        "elapsed_s",
        "objective",
    ):
        assert key in res.report.to_json()["rounds"][0]  # the report's JSON row


# ---- other data: real values, candidate sets -----------------------------------------


def real_multiclass(seed=4):
    rng = np.random.default_rng(seed)
    block = random_multiclass(rng, m=600, P=30, K=3, density=0.15)
    return block, Space(MULTICLASS, 30, 3, bias=True)


def candidate_sets(seed=5, m=400, D=25):
    """Events with 2-5 candidates of real-valued features, one or two correct."""
    rng = np.random.default_rng(seed)
    beta = np.where(rng.random(D) < 0.3, rng.normal(scale=1.5, size=D), 0.0)
    sizes = rng.integers(2, 6, size=m)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    F = sp.random(
        ptr[-1],
        D,
        density=0.2,
        format="csr",
        random_state=rng,
        data_rvs=lambda n: rng.normal(size=n),
    )
    s = F @ beta
    correct = np.zeros(ptr[-1], dtype=bool)
    for i in range(m):
        g = s[ptr[i] : ptr[i + 1]] + rng.gumbel(size=sizes[i])
        correct[ptr[i] + np.argsort(-g)[: 1 + (i % 5 == 0)]] = True
    block = CandidateBlock(F=F, event_ptr=ptr, correct=correct, c=rng.uniform(0.5, 2, size=m))
    return block, Space(CANDIDATES, D, 1)


@pytest.mark.parametrize("data", [real_multiclass, candidate_sets], ids=["real", "candidates"])
def test_other_data_ifs_and_sgc(data):
    """Real-valued features and candidate sets: no closed form, so SGC fits
    every candidate once at the start; after that the same rules."""
    block, space = data()
    n = 8
    ifs = run(block, space, "ifs", max_features=n, batch=4)
    sgc = run(block, space, "sgc", max_features=n, batch=4)
    cand = ifs.report["candidates"]
    assert stage(sgc.report.rounds[0]).gain_evaluations == cand  # the initial fit
    d = compare_selections(trace(ifs.report.rounds), trace(sgc.report.rounds))
    assert d.agree >= 4
    for res in (ifs, sgc):
        assert res.report.objective == pytest.approx(loss_at(block, space, res.weights), rel=1e-9)
    assert np.all(np.diff([r.objective for r in ifs.report.rounds]) < 0)
    assert sum(stage(r).gain_evaluations for r in sgc.report.rounds[1:]) < sum(
        stage(r).gain_evaluations for r in ifs.report.rounds[1:]
    )


# ---- resume --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, stage_features", [("ifs", 1), ("sgc-lookahead", 1), ("sgc", 0), ("ifs", 0)]
)
def test_resume_after_an_interruption_ends_with_the_same_selection(
    generated, tmp_path, method, stage_features
):
    block, space = generated
    # adaptive stages (0): the stage size is saved with the checkpoint
    cfg = config(method, max_features=10 if stage_features else 60, stage_features=stage_features)
    whole, resumed, _ = interrupt_and_resume(
        lambda: LocalBackend([block], space), cfg, tmp_path, after=4
    )
    assert resumed.report["selected"] == whole.report["selected"]
    np.testing.assert_array_equal(resumed.weights.values, whole.weights.values)
    np.testing.assert_array_equal(resumed.weights.bias, whole.weights.bias)
    assert [stage(r).gain_evaluations for r in resumed.report.rounds] == [
        stage(r).gain_evaluations for r in whole.report.rounds
    ]
    assert resumed.report.passes < whole.report.passes


# ---- long runs (slow): 200 stages on generated data and on PP attachment ------------


def ppattach_block(path):
    """Ratnaparkhi's PP-attachment training set as one block (duplicate
    events kept: each has weight 1)."""
    from sparkmaxent.data.readers import parse_ppattach
    from sparkmaxent.kernels.blocks import multiclass_block

    with open(path) as f:
        raw = [e for e in parse_ppattach(path, f, {}) if hasattr(e, "label")]
    vocab: dict[str, int] = {}
    labels = sorted({e.label for e in raw})
    indptr, indices, values = [0], [], []
    for e in raw:
        indices += [vocab.setdefault(name, len(vocab)) for name in e.features]
        values += e.values
        indptr.append(len(indices))
    y = [labels.index(e.label) for e in raw]
    block = multiclass_block(indptr, indices, values, y, np.ones(len(raw)), len(vocab), len(labels))
    return block, Space(MULTICLASS, len(vocab), len(labels), bias=True)


def long_comparison(block, space, stages, batch=64):
    """IFS and SGC for ``stages`` stages; checks that SGC parts from IFS
    only where a gain grew, and returns the figures."""
    captured = {}

    def keep(state):
        captured[state.round] = state.arrays["gain"].copy()

    cfg = dict(max_features=stages, gain_threshold=0.0, batch=batch)
    ifs = train(LocalBackend(split_block(block, 4), space), config("ifs", **cfg))
    sgc = train(LocalBackend(split_block(block, 4), space), config("sgc", **cfg), on_round=keep)
    d = compare_selections(trace(ifs.report.rounds), trace(sgc.report.rounds))
    if d.stage:
        stale = captured[d.stage - 1][d.features[0]]
        assert stale < d.gains[1] < d.gains[0]
    figures = {
        "stages": stages,
        "agree": d.agree,
        "first_difference": d.stage,
        "features": d.features,
        "gains": d.gains,
        "ties": d.ties,
        "ifs_evaluations_per_stage": ifs.report["mean_gain_evaluations_per_stage"],
        "sgc_evaluations_per_stage": sgc.report["mean_gain_evaluations_per_stage"],
        "ifs_passes": ifs.report.passes,
        "sgc_passes": sgc.report.passes,
    }
    assert figures["sgc_evaluations_per_stage"] < figures["ifs_evaluations_per_stage"] / 20
    return figures


@pytest.mark.slow
def test_sgc_against_ifs_for_200_stages_on_generated_data():
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=20000, n_predicates=3000, n_labels=4, n_support=60, seed=11
        )
    )
    space = Space(MULTICLASS, 3000, 4, bias=True)
    figures = long_comparison(data.block(), space, 200)
    log.warning("generated data: %s", figures)


@pytest.mark.slow
def test_sgc_against_ifs_for_200_stages_on_pp_attachment(shared_data):
    block, space = ppattach_block(os.path.join(shared_data, "ppattach", "training"))
    figures = long_comparison(block, space, 200)
    log.warning("PP attachment: %s", figures)


def test_ties_go_to_the_lowest_id_in_ifs_and_sgc():
    """With two labels (p, 0) and (p, 1) are mirror features with equal gains
    (to rounding: SGC's first stage uses the closed form, IFS a Newton fit);
    both methods take the lower id, so they do not part at a tie."""
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=2000,
            n_predicates=200,
            n_labels=2,
            active_per_event=4,
            n_support=8,
            n_copies=0,
            n_conjunctions=0,
            min_support_count=40,
            seed=5,
        )
    )
    block, space = data.block(), Space(MULTICLASS, 200, 2, bias=True)
    ifs = run(block, space, "ifs", max_features=8, batch=8)
    sgc = run(block, space, "sgc", max_features=8, batch=8)
    d = compare_selections(trace(ifs.report.rounds), trace(sgc.report.rounds))
    assert not d.ties and d.agree >= 2
    assert ifs.report["selected"][0] % 2 == 0 == sgc.report["selected"][0] % 2


# ---- penalized gains (train.ifs.gain_prior_variance) ----------------------------


@pytest.mark.parametrize("method", ["ifs", "sgc"])
def test_penalized_gains_are_the_decrease_of_the_l2_objective(method):
    """With gain_prior_variance = 1 / (gamma2 W) a stage adds the feature with the largest
    max_alpha G(alpha) - gamma2 alpha^2 / 2 (IFS and SGC alike), the loss
    still falls by exactly G at the chosen alpha, and a predicate seen with
    one label no longer goes to the alpha cap."""
    from scipy.optimize import minimize_scalar

    block, space = real_multiclass()
    # predicate 0 fires on two events, both of label 0: separable, alpha -> cap
    X = block.X.tolil()
    X[:, 0] = 0.0
    first0 = np.flatnonzero(block.y == 0)[:2]
    X[first0, 0] = 1.0
    block = type(block)(X=X.tocsr(), y=block.y, c=block.c, n_labels=block.n_labels)
    gamma2 = 1e-2
    s2 = float(1.0 / (gamma2 * block.c.sum()))  # the prior variance giving gamma2
    plain = run(block, space, method, max_features=12, gain_prior_variance=0.0)
    pen = run(block, space, method, max_features=12, gain_prior_variance=s2)
    rounds = [stage(r).best for r in pen.report.rounds]
    plain_picks = [stage(r).best for r in plain.report.rounds]
    assert max(abs(p.alpha) for p in plain_picks) == pytest.approx(30.0)
    assert max(abs(p.alpha) for p in rounds) < 10  # nowhere near the cap of 30
    # the first stage's pick: the best penalized gain by brute force over candidates
    start = bias_only(block, space)
    L0 = loss_at(block, space, start)
    brute = {}
    for j in np.flatnonzero(np.bincount(block.X.nonzero()[1], minlength=30) > 0):
        for k in range(space.n_labels):
            fid = int(j) * space.n_labels + k

            def neg(a, fid=fid):
                w = add_weight(start, fid, a)
                return loss_at(block, space, w) - L0 + 0.5 * gamma2 * a * a

            brute[fid] = -minimize_scalar(neg, bounds=(-30, 30), method="bounded").fun
    best = max(brute, key=brute.get)
    assert rounds[0].feature == best
    assert rounds[0].gain == pytest.approx(brute[best], rel=1e-5)
    # the objective is the loss L, falling by the unpenalized G at each alpha
    assert pen.report.objective == pytest.approx(loss_at(block, space, pen.weights), rel=1e-9)
    # penalized gains rank differently from the plain ones here
    assert [p.feature for p in plain_picks] != [p.feature for p in rounds]


def bias_only(block, space):
    from sparkmaxent.kernels import Weights

    w_k = np.bincount(block.y, weights=block.c, minlength=space.n_labels)
    return Weights(np.zeros(0, np.int64), np.zeros(0), np.log(w_k / w_k.sum()))


def add_weight(weights, fid, alpha):
    from sparkmaxent.kernels import Weights

    return Weights(np.array([fid], np.int64), np.array([alpha]), weights.bias)


# ---- stages of several features (issue 36) ---------------------------------------


@pytest.mark.parametrize("method", ["ifs", "sgc"])
def test_stages_of_k_features_take_the_k_best_gains_and_refit(generated, method):
    block, space = generated
    res = run(block, space, method, stage_features=4, max_features=40)
    rounds = res.report.rounds
    assert [r.added for r in rounds] == [4] * 10
    selected = res.report["selected"]
    assert len(set(selected)) == 40 and sorted(selected) == res.weights.ids.tolist()
    # stage 1: the 4 best exact gains of the starting model, best first
    first = [p.feature for p in stage(rounds[0]).picks]
    gains = [p.gain for p in stage(rounds[0]).picks]
    assert gains == sorted(gains, reverse=True)
    ifs_one = stage(run(block, space, "ifs", max_features=1).report.rounds[0])
    assert first[0] == ifs_one.best.feature
    # the refit: the objective is the loss at the weights kept (train.l2 = 1e-4
    # without the gain prior), below the loss of the unrefitted stage
    assert res.report.objective == pytest.approx(loss_at(block, space, res.weights), rel=1e-9)
    stages = [stage(r) for r in rounds]
    assert all(0 < s.refit_ratio for s in stages)
    # the refit's passes are part of the stage's, the gains' passes the rest
    assert all(0 < s.refit_passes < s.stage_passes and s.refit_s >= 0 for s in stages)
    objectives = [r.objective for r in rounds]
    assert objectives == sorted(objectives, reverse=True)


def test_adaptive_stages_double_and_halve_by_the_refit_without_held_out_data(generated):
    block, space = generated
    res = run(block, space, "sgc", stage_features=0, max_features=300, stage_features_max=64)
    rounds = res.report.rounds
    assert len(rounds) < 20 and res.weights.nnz == 300  # 300 features in a few stages
    sizes = [stage(r).stage_size for r in rounds]
    assert sizes[0] == 1
    active = 0
    for prev, r in zip(rounds, rounds[1:]):
        active += prev.added
        ratio = stage(prev).refit_ratio
        grown = (1.0 if ratio is None else ratio) >= 0.5
        size = stage(prev).stage_size * 2 if grown else stage(prev).stage_size // 2
        expect = min(max(size, math.ceil(active / 32), 1), 64)  # stage_features_min_share
        assert stage(r).stage_size == min(expect, 300 - active)
    assert max(sizes) == 64


def test_a_stage_refit_stops_at_stage_refit_gtol_and_saves_passes(generated):
    """train.ifs.stage_refit_gtol: a multi-feature stage's refit (not the
    chosen stage's refit or re-estimation) stops once its largest gradient
    entry is below it; 0: train.gtol."""
    block, space = generated

    def refit_violation(res) -> float:
        # the gradient of L + l2/2 ||w||^2 (train.l2 without the gain prior)
        # at the last stage's refitted weights, over its features and the bias
        w = res.weights
        lg = loss_grad(block, space, w, grad_ids=w.ids)
        grad = np.concatenate([lg.grad / lg.weight + 1e-4 * w.values, lg.grad_bias / lg.weight])
        return float(np.abs(grad).max())

    runs = {
        tol: run(block, space, "sgc", stage_features=8, max_features=64, stage_refit_gtol=tol)
        for tol in (0.0, 1e-3)
    }
    tight, loose = runs[0.0], runs[1e-3]
    assert refit_violation(tight) <= 1e-7  # train.gtol
    assert 1e-7 < refit_violation(loose) <= 1e-3
    passes = {
        tol: sum(stage(r).refit_passes for r in res.report.rounds) for tol, res in runs.items()
    }
    assert passes[1e-3] < passes[0.0]
    # a looser refit leaves the loss within a small fraction of the stage's gains
    assert loose.report.objective == pytest.approx(tight.report.objective, rel=1e-3)

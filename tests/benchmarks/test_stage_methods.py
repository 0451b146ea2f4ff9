"""benchmarks/stage_methods.py's targets: the automatic settings' rows
against sklearn-l2 on each corpus; rows of a ``--set`` variant are shown
on the page but are not targets."""

from __future__ import annotations

from benchmarks.stage_methods import targets


def row(corpus: str, method: str, score: float, features: int = 10, wall: float = 5.0) -> dict:
    return {"corpus": corpus, "method": method, "test_score": score, "features": features,
            "wall_s": wall}  # fmt: skip


def test_targets_read_the_automatic_settings_and_leave_variants_out():
    rows = [
        row("pp", "sklearn-l2", 83.5),
        row("pp", "bayes-factor", 82.0),
        row("pp", "bayes-factor per_round=400", 83.0, wall=500.0),  # a variant past the cap
        row("brown", "sklearn-l2", 58.0),
        row("brown", "bayes-factor", 57.5),
    ]
    out = targets(rows, 240.0)
    gap = out["bayes-factor: test score - sklearn-l2, every corpus"]
    assert gap["value"] == {"pp": -1.5, "brown": -0.5} and not gap["met"]
    assert not any("per_round" in name for name in out)
    ended = out["every run ends with a model within max_seconds 240"]
    assert set(ended["value"]) == {"pp bayes-factor", "brown bayes-factor"} and ended["met"]
    rows[1]["test_score"] = 82.6
    assert targets(rows, 240.0)["bayes-factor: test score - sklearn-l2, every corpus"]["met"]


def test_paired_gap_is_ours_minus_the_anchor_with_the_paired_standard_error():
    import numpy as np
    import pytest

    from benchmarks.stage_methods import paired_gap

    rng = np.random.default_rng(0)
    n = 200
    y = rng.integers(0, 3, n)
    c = rng.integers(1, 3, n).astype(float)
    anchor = {"c": c, "y": y, "hit": (rng.random(n) < 0.6).astype(float),
              "loglik": -rng.random(n)}  # fmt: skip
    ours = {k: v.copy() for k, v in anchor.items()}
    ours["hit"][:6] = 1 - ours["hit"][:6]  # six events scored differently
    ours["loglik"] = anchor["loglik"] + rng.normal(0.01, 0.05, n)
    ours["loglik"][7] = np.nan  # a label our model never saw: left out of the pair
    gap = paired_gap(ours, anchor)
    d = ours["hit"] - anchor["hit"]
    w = c / c.sum()
    assert gap["vs_l2_accuracy"] == pytest.approx(100 * (w @ d), abs=1e-4)
    assert gap["vs_l2_differ"] == 6
    assert gap["vs_l2_ours_right"] == int(np.sum(anchor["hit"][:6] == 0))
    # the paired standard error, computed here: weighted variance of the
    # differences over the effective number of events
    n_eff = c.sum() ** 2 / (c @ c)
    var = (c @ (100 * d - 100 * (w @ d)) ** 2) / c.sum() * n_eff / (n_eff - 1)
    assert gap["vs_l2_accuracy_se"] == pytest.approx(np.sqrt(var / n_eff), abs=1e-4)
    ok = np.isfinite(ours["loglik"])
    dl = (ours["loglik"] - anchor["loglik"])[ok]
    assert gap["vs_l2_loglik"] == pytest.approx(np.average(dl, weights=c[ok]), abs=1e-4)
    ck = c[ok]
    n_ok = ck.sum() ** 2 / (ck @ ck)
    mean = np.average(dl, weights=ck)
    se = np.sqrt((ck @ (dl - mean) ** 2) / ck.sum() * n_ok / (n_ok - 1) / n_ok)
    assert gap["vs_l2_loglik_se"] == pytest.approx(se, abs=1e-4)
    # far below the unpaired one: the noise both models share cancels
    assert gap["vs_l2_loglik_se"] < 0.3 * np.sqrt(2) * anchor["loglik"].std() / np.sqrt(n)
    with pytest.raises(ValueError, match="differ"):
        paired_gap({**ours, "y": np.roll(y, 1)}, anchor)


def test_sklearn_events_score_each_test_event_as_predict_proba_does(monkeypatch):
    import numpy as np
    import pytest
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    from benchmarks import stage_methods
    from sparkmaxent.kernels import MulticlassBlock

    rng = np.random.default_rng(1)
    X = sp.csr_matrix((rng.random((60, 5)) < 0.4).astype(float))
    y = rng.integers(0, 3, 60)
    fit = LogisticRegression().fit(X[:40], y[:40])
    test_y = y[40:].copy()
    test_y[0] = 3  # a label the model never saw
    test = MulticlassBlock(X=X[40:], y=test_y, c=np.ones(20), n_labels=4)
    monkeypatch.setattr(stage_methods, "arrays", lambda directory: test)
    got = stage_methods.sklearn_events(fit, "unused")
    proba = fit.predict_proba(X[40:])
    assert np.array_equal(got["hit"], (proba.argmax(axis=1) == test_y).astype(float))
    assert np.isnan(got["loglik"][0]) and got["hit"][0] == 0
    rows = np.arange(1, 20)
    assert got["loglik"][1:] == pytest.approx(np.log(proba[rows, test_y[1:]]))


def test_cv_path_reads_the_scores_and_iterations_logistic_regression_cv_chose_by():
    import numpy as np
    import pytest
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import PredefinedSplit

    from benchmarks.model_choice import lrcv_keys
    from benchmarks.stage_methods import cv_path

    rng = np.random.default_rng(2)
    X = sp.csr_matrix((rng.random((90, 6)) < 0.5).astype(float))
    y = (X @ rng.normal(0, 2, (6, 3))).argmax(axis=1)
    fold = np.r_[np.full(60, -1), np.zeros(30, dtype=int)]  # one held-out part, as ours
    keys = lrcv_keys("l2")
    # both attribute layouts where the release has the choice (1.9), else its only one
    layouts = [{}, {"use_legacy_attributes": True}] if "use_legacy_attributes" in keys else [{}]
    fits = [
        LogisticRegressionCV(
            Cs=4, cv=PredefinedSplit(fold), scoring="neg_log_loss", **{**keys, **layout}
        ).fit(X, y)
        for layout in layouts
    ]
    got = cv_path(fits[0])
    assert all(cv_path(fit) == got for fit in fits)  # either layout reads alike
    cv = fits[0]
    assert got["cv_Cs"] == pytest.approx(list(cv.Cs_), rel=1e-3)
    assert len(got["cv_scores"]) == 4 and all(v < 0 for v in got["cv_scores"])  # -log loss
    # the chosen C is the best score's
    assert np.atleast_1d(cv.C_)[0] == pytest.approx(cv.Cs_[int(np.argmax(got["cv_scores"]))])
    assert len(got["cv_iterations"]) == 4 and all(i >= 0 for i in got["cv_iterations"])

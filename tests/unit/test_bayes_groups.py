"""train.bayes.one_label_per_group: with held-out data a Bayes-factor
round takes its picks in groups after each rescoring (Eq. 14 between
groups, not between picks); two labels' features of one predicate fire
on the same events, so a group takes at most one of them and the other
waits for the next rescoring. Checked against the greedy order computed
here from the round's own gains, and on a run whose chosen stage changes.
And the size of the round after one that did not improve: half the picks
it took (``bayes_heldout.round_plan``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from sparkmaxent.backends import LocalBackend
from sparkmaxent.config import train_config
from sparkmaxent.methods.bayes import BayesFactor
from sparkmaxent.methods.bayes_heldout import round_plan
from sparkmaxent.methods.bayes_scores import log_posterior_gain
from sparkmaxent.methods.round_details import BayesRound
from sparkmaxent.selection.base import BestStage, LoopState
from sparkmaxent.selection.loop import best_of
from sparkmaxent.train import TrainingContext, train

from . import test_bayes
from .test_bayes import topic_documents

past_the_rule = test_bayes.past_the_rule  # the held-out run's fixture


def first_group(ids, gain, take, K):
    """The first ``take`` picks by largest gain (ties, as the rounds break
    them, ``loop.best_of``: to the lowest id), at most one a predicate when
    ``K``, else by gain alone."""
    left, out = np.flatnonzero(gain > 0), []
    while len(out) < take and len(left):
        i = left[best_of(gain[left], ids[left])]
        out.append(int(ids[i]))
        left = left[left != i]
        if K:
            left = left[ids[left] // K != ids[i] // K]
    return out


def test_a_group_takes_one_label_of_a_predicate_and_the_greedy_order_otherwise():
    tr, _, space = topic_documents(K=2)
    K, take = space.n_labels, 6
    for on in (True, False):
        ctx = TrainingContext(LocalBackend([tr], space), train_config(one_label_per_group=on))
        bf = BayesFactor(ctx)
        start = bf.start()
        _, ids, _, _ = bf.propose(start)
        fit, _ = bf.fit(start, ids)
        gain = log_posterior_gain(fit.loglik_change, fit.alpha, bf.sigma2)
        picks, _ = bf.select(
            start, ids, gain, fit.alpha, 3 * take, lambda k: 0.0, 0.0, take, by_gain=True
        )
        got = [p["feature"] for p in picks[:take]]
        assert got == first_group(ids, gain, take, K if on else 0)
        predicates = [f // K for f in got]
        if on:
            assert len(set(predicates)) == take
        else:  # on two labels a predicate's two features have the same gain
            assert len(set(predicates)) < take


def test_one_label_per_group_changes_a_held_out_run_on_two_labels():
    tr, he, space = topic_documents(K=2)
    keys = dict(method="bayes-factor", model_prior="uniform", per_round=10, patience=50)
    runs = {
        on: train(
            LocalBackend([tr], space),
            train_config(**keys, max_rounds=8, refit=False, one_label_per_group=on),
            LocalBackend([he], space),
        )
        for on in (True, False)
    }
    assert train_config().bayes.one_label_per_group  # the default
    share = {}
    for on, res in runs.items():
        ids = res.weights.active_ids()
        share[on] = len(np.unique(ids // space.n_labels)) / len(ids)
    # more of the chosen stage's features are distinct predicates
    assert share[True] > share[False]


def test_a_round_whose_proposals_ran_out_is_halved_from_what_it_took(past_the_rule):
    # a round that did not improve the best held-out stage is followed by half
    # the picks it took from the best stage; when its proposals ran out below
    # its size, half its size would take the same picks from there again
    tr, space, _, res = past_the_rule
    _, he, _ = topic_documents()
    ctx = TrainingContext(
        LocalBackend([tr], space),
        train_config(model_prior="uniform", per_round=10, patience=50),
        heldout=LocalBackend([he], space),
    )
    rows, best, checked = res.report.rounds, None, 0
    for i, r in enumerate(rows):
        size = r.detail_as(BayesRound).round_size
        if best is not None and r.heldout_score <= best.score and size > 2 * 10 + 1:
            for took in (size, size - 2, 15, 10):
                last = dataclasses.replace(r, added=took)
                state = LoopState(r.round, res.weights, trace=[*rows[:i], last], best=best)
                plan = round_plan(ctx, state)
                want = (took // 2, best.round) if took // 2 > 10 else (10, best.round)
                assert plan == (want if took > 10 else (10, None))
            checked += 1
        if best is None or r.heldout_score > best.score:
            best = BestStage(r.round, r.heldout_score)
    assert checked

"""Drawing events from the planted model of a ``SyntheticSpec``.

Predicate p fires independently with probability rate[p] = min(1, c *
rank(p) ** -s), a Zipf law with c chosen so the rates sum to
``active_per_event``; labels are drawn exactly (Gumbel-max) from the
planted conditional maxent model with conjunction terms::

    s_k(x) = b_k + sum_p x_p W[p, k] + sum_(a, b, k', v) [k' = k] x_a x_b v
    p(k | x) = exp(s_k(x)) / sum_k' exp(s_k'(x))
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .planted import SyntheticData, SyntheticSpec, planted_scores

logger = logging.getLogger("sparkmaxent.data.synthetic")

# Draw this many standard deviations of geometric gaps beyond the mean per
# predicate, so a second round of draws is rarely needed (see _bernoulli_columns).
_SLACK_SIGMAS = 6.0


def zipf_rates(n: int, mean_active: float, exponent: float) -> np.ndarray:
    """Rates ``min(1, c * r ** -exponent)`` for ranks r = 1..n, with c solved
    exactly so that they sum to ``mean_active``; shape (n,), decreasing.

    With the first j rates capped at 1, c = (mean_active - j) / sum_{r > j}
    r ** -exponent; the right j is the smallest for which rate j + 1 <= 1.
    """
    if not 0 < mean_active <= n:
        raise ValueError(f"expected 0 < mean_active <= n = {n}, got {mean_active}")
    w = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    tail = np.cumsum(w[::-1])[::-1]  # tail[j] = sum_{r >= j} w[r]
    j = np.arange(n)
    c = (mean_active - j) / tail
    ok = c * w <= 1.0 + 1e-12
    first = int(np.argmax(ok)) if ok.any() else n
    if first == n:
        return np.ones(n)
    rates = np.minimum(1.0, c[first] * w)
    rates[:first] = 1.0
    return rates


def _bernoulli_columns(
    rng: np.random.Generator, m: int, rates: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sample x_ip ~ Bernoulli(rates[p]) for i < m, all p, without an m x P array.

    The positions of the successes of a Bernoulli(q) sequence are the running
    sums of Geometric(q) gaps; each column draws a few standard deviations
    more gaps than it needs on average and redraws in the rare case that it
    did not get past m. Columns expected to fire less than once (m q < 1,
    the long Zipf tail of a large predicate space) draw their count instead,
    Binomial(m, q), and that many distinct rows uniformly
    (``_rare_columns``): the same law at a cost of their successes rather
    than of a dozen gaps each.

    Returns
    -------
    cols, rows : ndarray of int64, shape (nnz,)
        Column-major (all of column 0, then column 1, ...), rows increasing
        within a column.
    """
    cols_out: list[np.ndarray] = []
    rows_out: list[np.ndarray] = []
    rare = (rates > 0) & (m * rates < 1.0)
    todo = np.flatnonzero((rates > 0) & ~rare)
    slack = _SLACK_SIGMAS
    while todo.size:
        q = rates[todo]
        mean = m * q
        n_draw = np.ceil(mean + slack * np.sqrt(mean * (1 - q)) + 10)
        n_draw = np.minimum(m, n_draw).astype(np.int64)
        gaps = rng.geometric(np.repeat(q, n_draw))
        cs = np.cumsum(gaps)
        ends = np.cumsum(n_draw)
        base = np.concatenate([[0], cs[ends[:-1] - 1]])
        pos = cs - np.repeat(base, n_draw) - 1
        # a column is complete once its draws get past row m - 1 (m gaps of at
        # least 1 always do); incomplete ones are redrawn whole with more slack
        complete = cs[ends - 1] - base >= m
        keep = (pos < m) & np.repeat(complete, n_draw)
        cols_out.append(np.repeat(todo, n_draw)[keep])
        rows_out.append(pos[keep])
        todo = todo[~complete]
        slack *= 2
    if rare.any():
        c, r = _rare_columns(rng, m, np.flatnonzero(rare), rates[rare])
        cols_out.append(c)
        rows_out.append(r)
    cols = np.concatenate(cols_out) if cols_out else np.zeros(0, np.int64)
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, np.int64)
    if len(cols_out) > 1:  # redrawn or rare columns came last: restore column-major order
        order = np.lexsort((rows, cols))
        cols, rows = cols[order], rows[order]
    return cols.astype(np.int64), rows.astype(np.int64)


def _rare_columns(
    rng: np.random.Generator, m: int, columns: np.ndarray, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Bernoulli(q) columns as a Binomial(m, q) count and that many distinct
    rows drawn uniformly (rows drawn with replacement; a row repeated within
    its column is redrawn until none is, which leaves a uniform subset).

    Returns (cols, rows), unordered."""
    counts = rng.binomial(m, q)
    cols = np.repeat(columns, counts).astype(np.int64)
    rows = rng.integers(0, m, size=len(cols)).astype(np.int64)
    while True:
        key = cols * m + rows
        _, first = np.unique(key, return_index=True)
        again = np.ones(len(key), dtype=bool)
        again[first] = False
        if not again.any():
            return cols, rows
        rows[again] = rng.integers(0, m, size=int(again.sum()))


def _signed_weights(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    return rng.choice([-1.0, 1.0], size=n) * scale * rng.uniform(0.5, 1.5, size=n)


def generate(spec: SyntheticSpec | None = None) -> SyntheticData:
    """Draw events from the planted model of ``spec`` (module docstring).

    Vectorised throughout. The same spec (seed included) always gives the
    same data.

    Parameters
    ----------
    spec : SyntheticSpec, optional
        Defaults to ``SyntheticSpec()`` (5,000 events, 2,000 predicates,
        5 labels).

    Returns
    -------
    SyntheticData
    """
    spec = spec or SyntheticSpec()
    t0 = time.perf_counter()
    rng = np.random.default_rng(spec.seed)
    m, P, K = spec.n_events, spec.n_predicates, spec.n_labels
    n_base = P - spec.n_copies

    # predicate ids: a random permutation of Zipf ranks; copies take the last ids
    perm = rng.permutation(P)
    base_ids, copy_ids = perm[:n_base], perm[n_base:]
    rank_rates = zipf_rates(n_base, spec.active_per_event, spec.zipf_exponent)

    eligible, pairs_rank = _conjunction_ranks(spec, rank_rates)
    support, bias = _plant_support(
        rng, spec, base_ids, rank_rates, eligible[2 * spec.n_conjunctions :]
    )
    conj_pairs = base_ids[pairs_rank].astype(np.int64)
    conj_labels = rng.integers(0, K, size=spec.n_conjunctions).astype(np.int64)
    conj_weights = _signed_weights(rng, spec.n_conjunctions, spec.weight_scale)

    original_ids = rng.choice(support[0], size=spec.n_copies, replace=False).astype(np.int64)

    indptr, indices = _draw_events(rng, m, P, rank_rates, base_ids, copy_ids, original_ids)
    values = np.ones(len(indices))

    S = planted_scores(
        indptr, indices, values, support, bias, conj_pairs, conj_labels, conj_weights
    )
    labels = np.argmax(S + rng.gumbel(size=S.shape), axis=1).astype(np.int64)  # Gumbel-max

    rates = np.empty(P)
    rates[base_ids] = rank_rates
    rates[copy_ids] = rates[original_ids]

    data = SyntheticData(
        spec=spec,
        indptr=indptr,
        indices=indices,
        values=values,
        labels=labels,
        event_ids=np.arange(m, dtype=np.int64),
        support_ids=support[0],
        support_labels=support[1],
        support_weights=support[2],
        bias=bias,
        conjunction_pairs=conj_pairs.reshape(-1, 2),
        conjunction_labels=conj_labels,
        conjunction_weights=conj_weights,
        copy_ids=copy_ids.astype(np.int64),
        original_ids=original_ids,
        rates=rates,
        label_names=[f"L{k}" for k in range(K)],
    )
    logger.info(
        "generated %d events x %d predicates (%d labels, %d active), support %d, "
        "%d copies, %d conjunctions in %.2fs",
        m,
        P,
        K,
        len(indices),
        spec.n_support,
        spec.n_copies,
        spec.n_conjunctions,
        time.perf_counter() - t0,
    )
    return data


def _conjunction_ranks(
    spec: SyntheticSpec, rank_rates: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(ranks eligible for the planted structure, conjunction pairs by rank):
    conjunction members are the most frequent predicates that are not
    near-constant."""
    m = spec.n_events
    eligible = np.flatnonzero(rank_rates <= spec.max_support_rate)  # ranks, decreasing rate
    n_members = 2 * spec.n_conjunctions
    if len(eligible) < n_members:
        raise ValueError(
            f"expected at least {n_members} predicates with rate <= "
            f"max_support_rate={spec.max_support_rate} for {spec.n_conjunctions} "
            f"conjunctions, got {len(eligible)}"
        )
    member_ranks = eligible[:n_members]
    pairs_rank = member_ranks.reshape(-1, 2)
    co_counts = (
        m * rank_rates[pairs_rank[:, 0]] * rank_rates[pairs_rank[:, 1]]
        if spec.n_conjunctions
        else np.zeros(0)
    )
    if np.any(co_counts < spec.min_support_count):
        logger.warning(
            "conjunction pairs are expected to co-occur in only %s events "
            "(< min_support_count=%s): they will be hard to learn",
            np.round(co_counts, 1).tolist(),
            spec.min_support_count,
        )
    return eligible, pairs_rank


def _plant_support(
    rng: np.random.Generator,
    spec: SyntheticSpec,
    base_ids: np.ndarray,
    rank_rates: np.ndarray,
    pool: np.ndarray,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """((informative predicate ids, their labels, their weights), bias): the
    planted W's non-zeros. Informative predicates are drawn from the ranks
    ``pool`` (eligible, not conjunction members) expected to fire often
    enough in ``model_events`` events (``n_events`` if 0), each with a
    weight on one label; nothing here depends on ``n_events`` otherwise,
    so specs sharing ``model_events`` share the planted model."""
    K = spec.n_labels
    m = spec.model_events or spec.n_events
    pool = pool[m * rank_rates[pool] >= spec.min_support_count]
    if len(pool) < spec.n_support:
        raise ValueError(
            f"expected at least n_support={spec.n_support} predicates expected to fire in "
            f">= min_support_count={spec.min_support_count} of {m} events and <= "
            f"max_support_rate={spec.max_support_rate} of them, got {len(pool)}; "
            "raise n_events (model_events) or active_per_event, or lower n_support or "
            "min_support_count"
        )
    support_ranks = rng.choice(pool, size=spec.n_support, replace=False)
    support_ids = base_ids[support_ranks].astype(np.int64)
    support_labels = rng.integers(0, K, size=spec.n_support).astype(np.int64)
    support_weights = _signed_weights(rng, spec.n_support, spec.weight_scale)
    bias = rng.normal(0.0, spec.bias_scale, size=K)
    return (support_ids, support_labels, support_weights), bias


def _draw_events(
    rng: np.random.Generator,
    m: int,
    P: int,
    rank_rates: np.ndarray,
    base_ids: np.ndarray,
    copy_ids: np.ndarray,
    original_ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """CSR (indptr, indices) of the events: Bernoulli columns by rank, then the
    copies of their originals' columns, predicates increasing within an event."""
    n_base = len(base_ids)
    col_rank, rows = _bernoulli_columns(rng, m, rank_rates)
    cols = base_ids[col_rank]
    rank_of = np.empty(P, dtype=np.int64)
    rank_of[base_ids] = np.arange(n_base)
    if len(copy_ids):
        col_starts = np.searchsorted(col_rank, np.arange(n_base + 1))
        r0, r1 = col_starts[rank_of[original_ids]], col_starts[rank_of[original_ids] + 1]
        copy_rows = np.concatenate([rows[a:b] for a, b in zip(r0, r1)])
        copy_cols = np.repeat(copy_ids, r1 - r0)
        rows = np.concatenate([rows, copy_rows])
        cols = np.concatenate([cols, copy_cols])
    # CSR: sort by (event, predicate) with one key sort
    key = np.sort(rows * P + cols)
    rows, cols = key // P, key % P
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]).astype(np.int64)
    return indptr, cols.astype(np.int32)


__all__ = ["generate", "zipf_rates"]

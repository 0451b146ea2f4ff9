"""The configuration sections of the method families: grafting and its
thresholded variants, IFS/SGC, Bayes-factor selection and the lattice; each
a sub-section of ``train`` (config/schema.py), checked when built as every
section is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import ConfigError
from .rules import Section, key


@dataclass(frozen=True)
class GraftingConfig(Section):
    """l1 n-best grafting and its thresholded variants (Riezler & Vasserman
    2004): grafting, mle-ifs, l2-ifs."""

    PATH: ClassVar[str] = "train.grafting"
    l1: float = key(
        1.0e-4,
        "gamma1 of grafting: C(w) = L(w) + gamma1 ||w||_1 + elastic_l2/2 ||w||^2, L "
        "averaged over event weight (MLlib's regParam with elasticNetParam = 1).",
        gt=0,
    )
    elastic_l2: float = key(
        0.0, "gamma2 added to grafting's objective (elastic net); 0: pure l1.", ge=0
    )
    n_best: int = key(10, "Candidates added per round (1: Perkins' grafting).", ge=1)
    grad_threshold: float = key(
        1.0e-3, "mle-ifs, l2-ifs: add candidates with |dL/dw_j| above this.", gt=0
    )
    kkt_tol: float = key(
        1.0e-6,
        "Final optimality certificate: |dC/dw_j + l1 sign(w_j)| <= kkt_tol on active weights, "
        "|dC/dw_j| <= l1 + max(l1 kkt_tol, 2 min(gtol, kkt_tol / 2)) on zeros.",
        gt=0,
    )
    round_tol_ratio: float = key(
        0.9,
        "A round solves its active set only to a projected gradient of this times the "
        "gradient test's excess (max candidate |gradient| - threshold); the last round goes "
        "to the final tolerance. 0: every round to the final tolerance.",
        ge=0,
        lt=1,
    )
    round_radius: float = key(
        1.0,
        "Initial trust region (largest step of one weight) of each round's Newton solve; "
        "it doubles after every well-predicted step. Bounds the weights, not the biases. "
        "0: unbounded.",
        ge=0,
    )
    round_global_cg: int = key(
        0,
        "newton-cg rounds: once an iteration's free set (the weights no bound holds) is the "
        "last one's, the step is the whole data's Newton step by CG on the driver, each "
        "Hessian-vector product one pass, at most this many passes an iteration; 0: each "
        "partition's own step throughout (docs/methods/grafting.md, CG across passes).",
        ge=0,
    )
    round_crawl_cg: int = key(
        200,
        "newton-cg rounds: once the partitions' averaged step has twice been cut by the "
        "line search after their CG ran into its product cap (a round that crawls), the "
        "rest of the round's steps are the whole data's Newton step by face CG on the "
        "driver, each Hessian-vector product one pass, at most this many passes an "
        "iteration; 0: never (docs/methods/grafting.md, the crawl switch).",
        ge=0,
    )
    dense_test_max: int = key(
        4_000_000,
        "Largest candidate space (features) whose gradient test brings the dense gradient "
        "to the driver; above it the test is block-wise and only each block's best "
        "candidates come back. 0: always block-wise.",
        ge=0,
    )
    test_block_size: int = key(1_000_000, "Features per block of the block-wise test.", ge=1)
    partial_cut: float = key(
        0.5,
        "Dense gradient test: each data block ships its exact partial gradient at the "
        "active features and, elsewhere, only the entries above this fraction of the test "
        "threshold (per unit of its event weight); the driver bounds the rest and fetches "
        "exact sums in a second pass only where the bounds leave the test open, so the "
        "answer is the dense test's. 0: ship the dense partials.",
        ge=0,
        lt=1,
    )
    partial_keep: int = key(
        8,
        "Thresholded test that needs only the n best (not a certificate's count): each "
        "data block ships at most this many times n_best entries above the cut, its "
        "largest; the rest are bounded, fetched where a bound reaches the n best. 0: all.",
        ge=0,
    )
    combination_degree: int = key(
        1,
        "grafting: 2 or 3 adds combination features (Okanohara & Tsujii 2009): "
        "conjunctions of up to this many atomic predicates that fire together, "
        "found by a bound without enumerating them, once the atoms are optimized; "
        "predicate values must be in [0, 1]. 1: atoms only.",
        ge=1,
        le=3,
    )
    conjunction_growth: float = key(
        2.0,
        "Combination features on a warm-started gamma1 path point (its atoms enter all at "
        "once): the first combination round forms at most n_best new conjunction features, "
        "each later round that still finds some this many times the last; 1: n_best every "
        "round. The certified optimum is the same for any value.",
        ge=1,
    )


@dataclass(frozen=True)
class IfsConfig(Section):
    """Incremental feature selection and Selective Gain Computation (Berger
    et al. 1996; Zhou et al. 2003): ifs, sgc, sgc-lookahead."""

    PATH: ClassVar[str] = "train.ifs"
    gain_threshold: float = key(
        1.0e-6,
        "Stop when the best approximate gain (decrease of the mean loss) is at most this.",
        ge=0,
    )
    batch: int = key(32, "sgc: top stale candidates whose gains are recomputed together.", ge=1)
    batch_growth: int = key(
        2,
        "sgc: each further batch of a stage is this many times the last; the next stage "
        "starts from the one that settled it (halved after a one-batch stage); 1: fixed.",
        ge=1,
    )
    stage_features: int = key(
        0,
        "ifs, sgc: features a stage adds. 1: one, as in the papers; k > 1: the k best "
        "gains, then all selected weights refitted; 0: adaptive, from 1, doubling after a "
        "stage that improved the best held-out score (without held-out data: whose refit "
        "gained half its gains' sum), else halving (docs/methods/ifs-sgc.md).",
        ge=0,
    )
    stage_features_max: int = key(
        1024, "ifs, sgc with stage_features = 0: the most features a stage adds.", ge=1
    )
    stage_features_min_share: float = key(
        1 / 32,
        "ifs, sgc with stage_features = 0: a stage adds at least this share of the active "
        "set, so a flat held-out score does not leave one-feature stages; 0: no floor.",
        ge=0,
        lt=1,
    )
    stage_refit_gtol: float = key(
        1.0e-5,
        "ifs, sgc: the refit after a stage of several features stops once its largest "
        "gradient entry is below this (the chosen stage's refit and re-estimation use "
        "train.gtol); 0: train.gtol.",
        ge=0,
    )
    lookahead: int = key(
        500, "sgc-lookahead: after a pick, recompute the next L gains (Zhou et al.: 500).", ge=0
    )
    gain_prior_variance: float = key(
        1.0,
        "sigma^2 of a Gaussian prior on each new weight, sum units (as train.bayes."
        "prior_variance): gains max_alpha G(alpha) - gamma2 alpha^2 / 2, gamma2 = 1 / "
        "(sigma^2 W), so a feature seen with one label does not win at the alpha cap; "
        "0: the plain gains of the papers.",
        ge=0,
    )
    reestimate_every: int = key(
        0,
        "Re-fit all selected weights (with train.l2) every r stages and at the "
        "end (with a refit of the chosen stage, that refit instead); 0: never.",
        ge=0,
    )


@dataclass(frozen=True)
class BayesConfig(Section):
    """Approximate Bayes-factor selection (Daume III 2004): bayes-factor."""

    PATH: ClassVar[str] = "train.bayes"
    prior_variance: float = key(
        1.0, "sigma^2 of each weight's Gaussian prior (OptMAP gamma2 1/(sigma^2 W)); 0: W", ge=0
    )
    variance: str = key(
        "fixed",
        "fixed: prior_variance; evidence / heldout: the sigma^2 of largest Laplace evidence / "
        "best held-out stage over the geometric grid evidence_min .. evidence_max "
        "(evidence_points values).",
        choices=("fixed", "evidence", "heldout"),
    )
    evidence_min: float = key(0.1, "variance = evidence: the grid's smallest sigma^2.", gt=0)
    evidence_max: float = key(30.0, "variance = evidence: the grid's largest sigma^2.", gt=0)
    evidence_points: int = key(6, "variance = evidence: sigma^2 values (one run each).", ge=2)
    per_round: int = key(
        100,
        "S: features selected per round at most, each after the first rescored with the "
        "earlier ones fixed (Eq. 14); 1: one feature per OptMAP. With held-out data a "
        "round takes up to round_growth_cap S, growing while held-out improves; after one "
        "that did not, half as many from the best held-out stage; heldout_rescorings a round.",
        ge=1,
    )
    round_growth_cap: int = key(
        32,
        "With held-out data deciding the stop (beyond_rule): a round takes at most this "
        "many times per_round picks (rounds double after one that improved held-out, "
        "go back to the best stage with half as many after one that did not); 1: every "
        "round per_round.",
        ge=1,
    )
    heldout_rescorings: int = key(
        8,
        "With held-out data deciding the stop (beyond_rule): a round of any size rescores "
        "its proposals about this many times (Eq. 14), its picks taken together in as many "
        "groups, since each rescoring is a pass; more: closer to Figure 1's rescoring "
        "before every pick, and dearer.",
        ge=1,
    )
    one_label_per_group: bool = key(
        True,
        "Multiclass events, picks taken in groups after a rescoring (heldout_rescorings): "
        "a group takes at most one label's feature of a predicate while the rescored "
        "proposals hold another predicate's (the others fire on the same events, so their "
        "scores given it wait for the next rescoring, Eq. 14); false: the best scores "
        "whatever their predicates.",
    )
    sign: str = key(
        "laplace",
        "laplace: -1/2 log a_g (the correct Laplace approximation); printed: +1/2 log "
        "a_g (Eq. 12 as printed).",
        choices=("laplace", "printed"),
    )
    model_prior: str = key(
        "empirical-bayes",
        "Prior over models: uniform (Eq. 13); beta-binomial (Scott & Berger 2010, "
        "log((k+1)/(K-k)) per added feature); empirical-bayes (George & Foster 2000, "
        "log(p/(1-p)) with p <= 1/2 fitted to each round's proposals).",
        choices=("uniform", "beta-binomial", "empirical-bayes"),
    )
    rescore: int = key(50, "Proposals rescored before each pick after a round's first.", ge=1)
    rescore_mu: str = key(
        "fixed",
        "fixed: a rescoring keeps each mu_g of the round's fit and evaluates S and a_g given "
        "the picks (Figure 1, Eq. 14; one pass); refit: fits mu_g again (a gain fit).",
        choices=("fixed", "refit"),
    )
    beyond_rule: bool = key(
        True,
        "With held-out data (train.choice.best_stage, patience > 0): the rule's stop is "
        "one candidate stage; the run goes on with the proposals of largest log posterior "
        "gain S(mu_g) - mu_g^2/(2 sigma^2) until the held-out stop rule or no proposal is "
        "left; false: stop.",
    )
    margin_fraction: float = key(
        0.5,
        "Proposals come from the misclassified training events (Daume III 2004, sec. 3.6) "
        "and, while these weigh less than this fraction of the events, from the correct "
        "events of smallest margin (gold probability minus the best other's) up to it "
        "(an extension); 0: mistakes only, as the note.",
        ge=0,
        le=1,
    )
    signature_bits: int = key(
        8192,
        "Proposals firing on no common event (event bitmaps of this many bits) are "
        "picked without rescoring; 0: rescore before every pick.",
        ge=0,
        multiple_of=8,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.evidence_max > self.evidence_min:
            raise ConfigError(
                f"train.bayes.evidence_max: must be above train.bayes.evidence_min "
                f"({self.evidence_min:g}), got {self.evidence_max:g}"
            )


@dataclass(frozen=True)
class LatticeConfig(Section):
    """Mikheev's feature collocation lattice (1998): lattice."""

    PATH: ClassVar[str] = "train.lattice"
    max_atoms: int = key(
        0,
        "Atomic predicates the lattice is built over: the k most frequent "
        "(the paper used 238); 0: every predicate seen in training.",
        ge=0,
    )
    max_nodes: int = key(
        50_000,
        "Stop with exit code 3 when the lattice (observed configurations "
        "and their intersections) passes this many nodes.",
        ge=1,
    )
    smoothing: float = key(
        5.0,
        "THRESHOLD T of the selection's smoothing towards uniform, "
        "L = T / (T + xi'), for nodes of few observations.",
        ge=0,
    )
    select_patience: int = key(
        20,
        "Selection stops after this many steps without a better held-out "
        "likelihood (without held-out data: training AIC).",
        ge=1,
    )
    max_steps: int = key(0, "Selection steps at most; 0: no limit.", ge=0)
    score_batches: int = key(
        0,
        "Batches the candidates of a selection step are scored in (Spark "
        "tasks); 0: twice the default parallelism (1 without Spark).",
        ge=0,
    )
    constraint_threshold: float = key(
        5.0,
        "Constrain optimized nodes whose feature frequency (marginal over labels) exceeds this.",
        ge=0,
    )
    unconstrain_fraction: float = key(
        0.05,
        "Generalization unconstrains this fraction of the constraints per "
        "round (at least one), the most specific ones with weights closest to 0.",
        gt=0,
        le=1,
    )
    cache_widened: bool = key(
        True,
        "Generalization: form the constrained nodes' conjunctions in the "
        "events once and refit on the widened copies (in process, or a derived "
        "cached copy of the blocks on Spark: an RDD or a DataFrame; memory for "
        "speed); false: form them in every pass.",
    )
    generalize_patience: int = key(
        3,
        "Generalization stops after this many rounds without a better held-out "
        "likelihood (without held-out data: training AIC).",
        ge=1,
    )

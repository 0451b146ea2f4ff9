"""The configuration schema: every key of every section with its type,
default, allowed values and meaning, checked whenever a section is built
(from TOML, ``--set`` overrides or Python), so a bad value fails before
Spark starts, with a message naming the key. The method families'
sub-sections of ``train`` are in config/method_sections.py, the runtime
sections (``spark``, ``output``) in config/runtime.py.

The reference (docs/configuration.md) and conf/defaults.toml are generated
from this module (``python -m sparkmaxent.config.reference``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import ClassVar

from .. import registry
from .method_sections import BayesConfig, GraftingConfig, IfsConfig, LatticeConfig
from .rules import Section, key
from .runtime import OutputConfig, SparkConfig


@dataclass(frozen=True)
class DataConfig(Section):
    """Where events come from: prepared datasets, or inputs the pipeline
    job prepares first."""

    PATH: ClassVar[str] = "data"
    train: str = key("", "Prepared training dataset (the output of `sparkmaxent prepare`).")
    heldout: str = key("", "Prepared held-out dataset: progress lines and model choice.")
    test: str = key("", "Prepared test dataset, evaluated at the end of the pipeline job.")
    format: str = key(
        "synthetic",
        "Reader of the *_inputs: maxent, svmlight, tadm, conll, ppattach; a Spark "
        'source of table files (parquet, orc, json, delta, ...); "table" (catalog '
        'names); or "synthetic" for the built-in generator.',
    )
    train_inputs: list = key([], "Pipeline job: files (or a table) of the training data.")
    heldout_inputs: list = key([], "Pipeline job: files (or a table) of the held-out data.")
    test_inputs: list = key([], "Pipeline job: files (or a table) of the test data.")
    options: dict = key({}, 'Reader options, e.g. { mode = "basenp" }; spark.read\'s for tables.')
    label_col: str = key("label", "Table inputs: the label column.")
    features_col: str = key("features", "Table inputs: array<string>, map or Vector features.")
    values_col: str = key("", 'Table inputs: values of array<string> features; "": 1.0.')
    weight_col: str = key("", 'Table inputs: the event weight column; "": 1.0.')
    group_col: str = key("", 'Candidate-set tables: the group (event) id; "": multiclass.')
    correct_col: str = key("correct", "Candidate-set tables: the correct flag (bool, or > 0).")
    prepare_cutoff: int = key(
        0, "Drop predicates seen in fewer (weighted) events when preparing; 0 keeps all.", ge=0
    )
    partitions: int = key(0, "Spark partitions of the events; 0: the default parallelism.", ge=0)
    min_partition_events: int = key(
        1000,
        "Training on Spark with data.partitions = 0: fewer partitions than Spark's default "
        "where each would hold fewer events than this, so data of fewer than twice as many "
        "events is one partition: a Hessian-free round averages the partitions' own Newton "
        "steps, poor when each holds few of its features' events; 0: off.",
        ge=0,
    )
    binary: bool = key(
        False,
        "Binary predicates: a feature present in an event counts 1.0 however often "
        "it occurs (a token repeated in a sentence, an array<string> column's "
        "repeats) and a map or Vector value becomes 1.0 where it is non-zero, as "
        "CountVectorizer's binary = true; combination features need it on count "
        "data. false: repeats are summed. Data prepared with a vocabulary (held-out, "
        "test, evaluate, predict) follows the vocabulary's setting. --binary / "
        "--no-binary override it.",
    )
    synthetic: dict = key({}, 'SyntheticSpec fields for format = "synthetic".')
    in_process_max_events: int = key(
        100_000,
        'Datasets of at most this many events are trained ("spark" backends become '
        '"local"), fingerprinted and scored in the driver\'s process; so are text inputs '
        "of at most in_process_bytes_per_event bytes per such event and tables of at "
        "most this many rows (no key column) prepared; 0: never. Runs log the plan.",
        ge=0,
    )
    in_process_bytes_per_event: int = key(
        512, "Text input bytes per event for in_process_max_events' prepare test.", ge=1
    )
    heldout_fraction: float = key(
        0.0,
        "Pipeline job and prepare (--heldout-fraction): carve this fraction of the "
        "training inputs out as held-out data, label-stratified and seeded, prepared "
        "with the dictionary of the rest (tagged sentences stay whole); 0: none. "
        "Ignored when held-out inputs are given, and by prepare with --vocabulary "
        "or --no-merge (not training data).",
        ge=0,
        lt=1,
    )
    split_seed: int = key(0, "Seed of the held-out split (the same seed, the same split).", ge=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.synthetic:  # its fields checked here, not when the pipeline reaches them
            from ..data.synthetic.planted import SyntheticSpec

            SyntheticSpec.from_config(self.synthetic)


@dataclass(frozen=True)
class SelectionConfig(Section):
    """Keys every feature-selection method reads (the round loop)."""

    PATH: ClassVar[str] = "train.selection"
    max_rounds: int = key(
        0,
        "Stop after this many rounds; 0: until the method stops by itself. A run may "
        "be resumed with another value.",
        ge=0,
    )
    max_seconds: float = key(
        0.0,
        "Time budget of the whole training run from its start (setup, rounds, every path "
        "point, refit; summed over resumed sessions): stop before a round that (as long as "
        "the last one plus its growth) with the passes after the rounds would end past it, "
        "or after the first round that ends past it; the model is the best held-out stage "
        "so far (stage methods) or the last round. 0: no limit. Resumable with another value.",
        ge=0,
    )
    max_features: int = key(
        0, "ifs, sgc, bayes-factor: stop after this many selected features; 0: no limit.", ge=0
    )
    plots: bool = key(True, "Write PNG plots of the selection trace next to the report.")
    solver: str = key(
        "auto",
        "Round optimizer: newton (exact Hessian block per pass), newton-cg (Hessian-free, "
        "n-vectors per pass), lbfgs-b, or auto (newton to newton_max_active, newton-cg beyond).",
        choices=("auto", "newton", "newton-cg", "lbfgs-b"),
    )
    newton_max_active: int = key(
        1000,
        "auto: the largest active set (features + labels) solved by exact Newton, "
        "(n+K)(n+K+1)/2 doubles a partition per pass; newton-cg beyond, linear in n.",
        ge=1,
    )
    blas_threads: int = key(
        1,
        "Threads of the driver's BLAS and LAPACK during a fit (the Newton "
        "solve's matrix products), through threadpoolctl when "
        "installed; a multithreaded BLAS on busy cores spins. 0: BLAS's "
        "default.",
        ge=0,
    )
    gain_method: str = key(
        "sketch",
        "How gains (and Bayes-factor mu_g, a_g) are fitted: "
        "sketch (2 passes per batch) or exact (a pass per Newton iteration).",
        choices=("sketch", "exact"),
    )


@dataclass(frozen=True)
class ChoiceConfig(Section):
    """Model choice on held-out data: paths with warm starts (grafting over
    gamma1, l2 over gamma2) and the best stage of ifs, sgc and bayes-factor
    (docs/methods/model-choice.md)."""

    PATH: ClassVar[str] = "train.choice"
    criterion: str = key(
        "loglik",
        "Held-out score a choice maximizes: loglik (mean log-likelihood), "
        "accuracy, or chunk_f1 (CoNLL chunk F1, IOB label sets).",
        choices=("loglik", "accuracy", "chunk_f1"),
    )
    one_se: bool = key(
        False,
        "Paths: take the sparsest point whose held-out score is within one standard error "
        "of the best (the one-standard-error rule).",
    )
    path: bool = key(
        False,
        "grafting, l2: fit a path of penalties (warm-started, strongest first) and keep "
        "the point with the best held-out score; needs held-out data.",
    )
    refit: bool = key(
        True,
        "With held-out data: refit the chosen path point's penalty (the best stage's "
        "features under the method's prior: ifs, sgc, bayes-factor) on the training and "
        "held-out events, warm-started (LogisticRegressionCV's refit); false: no refit.",
    )
    stage_prior_scales: list = key(
        [],
        "ifs, sgc, bayes-factor with refit: before the refit, fit the chosen stage's "
        "features on the training events under the method's prior variance times each of "
        "these (strongest first, warm-started, until the stop rule) and refit the scale of "
        "the best held-out score, as LogisticRegressionCV chooses C (e.g. [0.0625, 0.25, 1, "
        "4, 16, 64]); []: the method's own prior.",
    )
    refit_all_labels: str = key(
        "auto",
        "ifs, sgc, bayes-factor with refit, multiclass events: true: the refit fits every "
        "label's feature of each predicate the chosen stage holds for some label (the "
        "selection a choice of predicates); false: the chosen stage's features only; auto: "
        "both fitted on the training events, the better held-out score refitted.",
        choices=("auto", "false", "true"),
    )
    refit_reserve_passes: int = key(
        50,
        "Runs with max_seconds and a refit (or ifs/sgc's final re-estimation): no stage "
        "or path point starts unless this many of its passes still fit after it (a path "
        "counts them at its costliest point's seconds a pass, at most that point's own "
        "seconds); 0: none.",
        ge=0,
    )
    points: int = key(10, "Points of a default path grid.", ge=2)
    l1_ratio: float = key(
        1.0e-3,
        "Default gamma1 grid: geometric from gamma1_max (max |gradient| of "
        "the bias-only model) down to this times gamma1_max.",
        gt=0,
        lt=1,
    )
    l1_grid: list = key([], "grafting path: these gamma1 values instead of the default grid.")
    l2_grid: list = key(
        [],
        "l2 path: these gamma2 values instead of the default grid 1 / (C W), "
        "C in logspace(-4, 4, points) as LogisticRegressionCV's Cs.",
    )
    elastic_grid: list = key(
        [],
        "grafting path: one gamma1 path per gamma2 (elastic_l2) in this list, the best "
        "held-out point over all chosen (elastic net); []: train.grafting.elastic_l2 only.",
    )
    l2_mixes: list = key(
        [0.0, 0.5, 0.9],
        "grafting path: a gamma1 path per l2 mix m (gamma2 = gamma1 m / (1 - m); "
        "glmnet's alpha = 1 - m), pure l1 (0) first; [0]: pure l1. Not with "
        "train.grafting.elastic_l2 or elastic_grid.",
    )
    mix_stop: bool = key(True, "l2_mixes: next mix while the last beat sparser by > its SE.")
    mix_accuracy_gain: float = key(
        0.005,
        "l2_mixes: a denser mix within one SE of the best held-out score replaces the "
        "choice when its held-out accuracy gains more than this plus the paired SE; 1: off.",
        ge=0,
        le=1,
    )
    mix_max: float = key(
        0.999,
        "l2_mixes: next 1 - (1 - m) / 10 while the densest gains, up to this "
        "(each on a pass budget and a share of max_seconds).",
        ge=0,
        lt=1,
    )
    patience: int = key(
        2,
        "Stop a path (or a stage run of ifs, sgc, bayes-factor keeping its best "
        "held-out stage) once this many points (stages) came after its best one "
        "and the last is below the best by more than patience_se standard errors "
        "of the paired held-out difference (a tie never stops); 0: fit every "
        "point, run stages to the method's own stop.",
        ge=0,
    )
    patience_se: float = key(
        1.0,
        "Paths and stage runs: standard errors of the held-out difference (paired "
        "event by event, or fold by fold) by which the last point must be below "
        "the best to stop; 0: any worse point.",
        ge=0,
    )
    max_weights: int = key(
        0,
        "Paths: stop after the first point with more non-zero weights than this (glmnet's "
        "pmax; that point may be chosen); 0: no limit.",
        ge=0,
    )
    cut_passes: float = key(
        1.0, "Paths: a point's pass budget, times the earlier points' passes; 0: no cut.", ge=0
    )
    folds: int = key(
        0,
        "Choose the path point or stage by k-fold cross-validation (k >= 2); "
        "1: on the held-out part; 0: automatic, auto_folds folds over the training "
        "and held-out events together for an l2 path of at most kfold_max_events "
        "events (grafting: kfold_max_events_grafting), else the held-out part. A path's "
        "patience and grid extension read the mean fold score.",
        ge=0,
    )
    kfold_max_events: int = key(
        2_000,
        "folds = 0: an l2 path over at most this many events (training and "
        "held-out together) chooses by auto_folds folds instead of the held-out "
        "part; 0: never.",
        ge=0,
    )
    kfold_max_events_grafting: int = key(
        0,
        "folds = 0: a grafting path (its l2 mixes included) over at most this many "
        "events chooses by auto_folds folds, as kfold_max_events for l2; 0: never (the "
        "default: where measured, the folds chose the held-out choice's l2 mix at many "
        "times its time; docs/methods/model-choice.md).",
        ge=0,
    )
    auto_folds: int = key(5, "Folds of the automatic k-fold choice (folds = 0).", ge=2)
    fold_seed: int = key(0, "Seed of the k-fold assignment (train.choice.folds).", ge=0)
    best_stage: bool = key(
        True,
        "ifs, sgc, bayes-factor with held-out data: the model is the stage "
        "with the best held-out score, not the last one.",
    )


@dataclass(frozen=True)
class TrainConfig(Section):
    """What to train and how: keys common to every method, and one
    sub-section per method family."""

    PATH: ClassVar[str] = "train"
    method: str = key(
        registry.DEFAULT_METHOD,
        "Training method (docs/methods/; the registry: sparkmaxent/registry.py).",
        choices=tuple(registry.METHODS),
    )
    backend: str = key(
        "spark",
        "spark (the RDD backend in a classic session, the DataFrame backend under "
        "Spark Connect), spark-rdd, spark-frame (blocks cached as a DataFrame; "
        "also in a classic session), or local (in-process, for data that fits "
        "one machine).",
        choices=("spark", "spark-rdd", "spark-frame", "local"),
    )
    standardize: bool = key(
        False, "Zero mean, unit variance per predicate (stored with the model)."
    )
    bias: bool = key(True, "An unpenalized per-label bias (multiclass events).")
    l2: float = key(
        1.0e-4,
        "gamma2 of L(w) + gamma2/2 ||w||^2 (L averaged over event weight, "
        "as MLlib's regParam); used by l2, cutoff, l2-ifs, lattice and re-estimation.",
        ge=0,
    )
    cutoff: int = key(0, "cutoff: keep features whose empirical count is at least this.", ge=0)
    max_iter: int = key(
        1000, "L-BFGS iterations (a selection round: Newton or L-BFGS-B iterations).", ge=1
    )
    memory: int = key(10, "L-BFGS history.", ge=1)
    gtol: float = key(1.0e-7, "Stop when the largest projected gradient entry is below this.", gt=0)
    ftol: float = key(1.0e-12, "Or when the relative objective decrease is below this.", ge=0)
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    grafting: GraftingConfig = field(default_factory=GraftingConfig)
    ifs: IfsConfig = field(default_factory=IfsConfig)
    bayes: BayesConfig = field(default_factory=BayesConfig)
    choice: ChoiceConfig = field(default_factory=ChoiceConfig)
    lattice: LatticeConfig = field(default_factory=LatticeConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        check = registry.method(self.method).check
        if check is not None:  # the method's own checks (registry.py)
            check(self)


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    output: OutputConfig = field(default_factory=OutputConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def sections(cls: type = Config, prefix: str = "") -> dict[str, type]:
    """Every section class by its dotted path, parents first."""
    out: dict[str, type] = {}
    for f in fields(cls):
        sub = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if isinstance(sub, type) and dataclasses.is_dataclass(sub):
            path = f"{prefix}{f.name}"
            out[path] = sub
            out.update(sections(sub, path + "."))
    return out

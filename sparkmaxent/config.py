"""Configuration: frozen dataclasses loaded from TOML, overridable on the
command line with ``--set section.key=value`` (value parsed as TOML).

The resolved configuration is saved with every model.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from dataclasses import dataclass, field, fields


@dataclass(frozen=True)
class SparkConfig:
    """Spark session settings. ``master = ""`` leaves the master to
    spark-submit (or pyspark's default, local[*])."""

    master: str = ""
    app_name: str = "sparkmaxent"
    conf: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DataConfig:
    """Where events come from.

    ``train``/``heldout``/``test`` are prepared dataset directories (see
    data/schema.py). The pipeline job can also make them: from ``inputs`` in
    ``format`` (a reader name, or "synthetic" for the built-in generator).
    """

    train: str = ""
    heldout: str = ""
    test: str = ""
    format: str = "synthetic"
    train_inputs: list = field(default_factory=list)
    heldout_inputs: list = field(default_factory=list)
    test_inputs: list = field(default_factory=list)
    options: dict = field(default_factory=dict)
    prepare_cutoff: int = 0
    partitions: int = 0
    synthetic: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TrainConfig:
    """What to train and how.

    method : a name in sparkmaxent.train.METHODS ("mle", "l2", "cutoff",
        "grafting", "mle-ifs", "l2-ifs", "ifs", "sgc", "sgc-lookahead",
        "bayes-factor").
    l2 : gamma2 of C(w) = L(w) + gamma2/2 ||w||^2 (loss averaged over event
        weight, as MLlib's regParam); used by "l2", "cutoff" and "l2-ifs".
    cutoff : "cutoff" keeps features whose empirical count >= cutoff.
    l1 : gamma1 of "grafting" (MLlib's regParam with elasticNetParam=1).
    elastic_l2 : gamma2 added to grafting's objective (elastic net; 0: pure l1).
    n_best : features added per grafting round (1 = Perkins' grafting).
    grad_threshold : gradient-test threshold of "mle-ifs" and "l2-ifs".
    kkt_tol : tolerance of the final optimality certificate.
    round_tol_ratio : grafting family: a round solves its active set only to
        a projected gradient of round_tol_ratio times the gradient test's
        excess (max candidate |gradient| - threshold), never tighter than
        needed for the certificate; the active set is finished to the final
        tolerance once no candidate passes the test. 0: every round to the
        final tolerance.
    max_rounds : stop selection after this many rounds (0: until no
        candidate passes the test).
    max_seconds : stop selection after the first round that ends past this
        many seconds of selection time, summed over resumed sessions (0: no
        limit); for scheduled pipelines with a time slot.
    solver : optimizer of a selection round: "newton", "lbfgs-b" or "auto"
        (Newton while active features + labels <= newton_max_active).
    dense_test_max : largest candidate space (features) whose gradient test
        brings the dense gradient to the driver; above it the test is
        block-wise: partial gradients are summed per feature block across
        executors and only each block's best candidates and KKT figures
        come back (kernels/topk.py). 0: always block-wise.
    test_block_size : features per feature block of the block-wise test.
    plots : write PNG plots of the selection trace next to the report.
    max_features : "ifs"/"sgc"/"bayes-factor": stop after this many features
        (0: no limit).
    gain_threshold : "ifs"/"sgc": stop when the best gain (decrease of the
        mean loss L) is below this.
    sgc_batch : "sgc": candidates whose gains are recomputed per pass batch.
    lookahead : "sgc-lookahead": after each selection, recompute the next L
        candidates' gains (Zhou et al. used 500).
    reestimate_every : "ifs"/"sgc": re-fit all selected weights (with l2)
        every r stages and at the end (0: never; only the new weight changes).
    gain_method : how gains (and Bayes-factor mu_g, a_g) are fitted: "sketch"
        (2 passes per batch) or "exact" (a pass per Newton iteration);
        kernels/gains.py.
    prior_variance : "bayes-factor": sigma^2 of the Gaussian prior on each
        weight, on the log-likelihood summed over events (not averaged); used
        in the evidence and in OptMAP (gamma2 = 1 / (sigma^2 W)), so ``l2``
        is not used. 0 (default): sigma^2 = W, the total event weight, an
        Occam factor of at least BIC's 1/2 log W (selection/bayes.py).
    bf_per_round : "bayes-factor": S, features selected per round at most
        (each after the first rescored with the earlier ones fixed, Eq. 14).
    bf_sign : "bayes-factor": "laplace" (-1/2 log a_g, the correct Laplace
        approximation) or "printed" (+1/2 log a_g, Daume 2004 Eq. 12 as
        printed and MEGAM; with prior_variance <= 1 it never stops by itself).
    bf_model_prior : "bayes-factor": prior over models, "uniform" (Daume 2004
        Eq. 13), "beta-binomial" (Scott & Berger 2010: a multiplicity
        correction of log((k + 1) / (K - k)) per added feature, no parameter)
        or "empirical-bayes" (George & Foster 2000: log(p / (1 - p)), p <= 1/2
        fitted to each round's proposals, no parameter).
    bf_rescore : "bayes-factor": proposals rescored before each pick after
        the first of a round (one fit_gains call each).
    bf_signature_bits : "bayes-factor": proposals that fire on no common
        event (event bitmaps of this many bits, a multiple of 8) are picked
        without a rescoring between them; 0: rescore before every pick.
    standardize : zero mean, unit variance per predicate (stored with the model).
    bias : a per-label unpenalized bias (multiclass only).
    backend : "spark" or "local" (in-process, for data that fits one machine).
    """

    method: str = "l2"
    l2: float = 1.0e-4
    cutoff: int = 0
    standardize: bool = False
    bias: bool = True
    backend: str = "spark"
    max_iter: int = 1000
    memory: int = 10
    gtol: float = 1.0e-7
    ftol: float = 1.0e-12
    l1: float = 1.0e-4
    elastic_l2: float = 0.0
    n_best: int = 10
    grad_threshold: float = 1.0e-3
    kkt_tol: float = 1.0e-6
    round_tol_ratio: float = 0.1
    max_rounds: int = 0
    max_seconds: float = 0.0
    solver: str = "auto"
    newton_max_active: int = 7000
    dense_test_max: int = 4_000_000
    test_block_size: int = 1_000_000
    plots: bool = True
    max_features: int = 0
    gain_threshold: float = 1.0e-6
    sgc_batch: int = 32
    lookahead: int = 500
    reestimate_every: int = 0
    gain_method: str = "sketch"
    prior_variance: float = 0.0
    bf_per_round: int = 1
    bf_sign: str = "laplace"
    bf_model_prior: str = "uniform"
    bf_rescore: int = 50
    bf_signature_bits: int = 8192


@dataclass(frozen=True)
class OutputConfig:
    """Where results go: the model directory and the run report (JSON)."""

    dir: str = "out/run"
    overwrite: bool = True


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    output: OutputConfig = field(default_factory=OutputConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def digest(self) -> str:
        """Short hash of the resolved configuration (for checkpoints)."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


_SECTION_TYPES = {"data": DataConfig, "train": TrainConfig, "spark": SparkConfig,
                  "output": OutputConfig}


def _section(name: str, values: dict, source: str):
    cls = _SECTION_TYPES[name]
    known = {f.name for f in fields(cls)}
    unknown = set(values) - known
    if unknown:
        raise ValueError(f"{source}: unknown key(s) {sorted(unknown)} in [{name}]; "
                         f"expected some of {sorted(known)}")
    return cls(**values)


def config_from_dict(raw: dict, source: str = "config") -> Config:
    unknown = set(raw) - set(_SECTION_TYPES)
    if unknown:
        raise ValueError(f"{source}: unknown section(s) {sorted(unknown)}; "
                         f"expected some of {sorted(_SECTION_TYPES)}")
    return Config(**{name: _section(name, raw.get(name, {}), source) for name in _SECTION_TYPES})


def parse_override(item: str) -> tuple[str, str, object]:
    """``section.key=value`` -> (section, key, value); value parsed as TOML,
    falling back to a plain string."""
    path, sep, text = item.partition("=")
    section, dot, key = path.strip().partition(".")
    if not sep or not dot or section not in _SECTION_TYPES:
        raise ValueError(f"expected an override like 'train.l2=1e-5', got {item!r}")
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    return section, key.strip(), value


def load_config(path: str | None = None, overrides: list[str] | None = None) -> Config:
    """Read a TOML file (or start from defaults) and apply overrides."""
    raw: dict = {}
    if path:
        with open(path, "rb") as f:
            try:
                raw = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise ValueError(f"{path}: not valid TOML: {e}") from e
    for item in overrides or []:
        section, key, value = parse_override(item)
        raw.setdefault(section, {})[key] = value
    return config_from_dict(raw, path or "overrides")

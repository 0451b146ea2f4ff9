"""The training methods: one entry per ``train.method`` name, and the one
place a method's name is spelled outside its own module.

An entry says what the method is (its fit function, its family), what it
supports (a penalty path, a best held-out stage, k folds, combination
features, a warm start), how MLlib's ``regParam``/``elasticNetParam`` map
onto its penalty (the pyspark.ml estimators), and which configuration
checks it adds. Everything else is derived from it: the schema's choices
for ``train.method`` (config/schema.py), ``train()``'s dispatch (train.py),
the path and fold checks (choice/path.py, choice/folds.py), the ml
mapping (ml/params.py, ml/base.py). Adding a method is an entry here plus
its own module.

This module imports no training code, so the configuration can import it:
a fit function is named ``"module:function"`` and imported when first used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

#: the schema key of each penalty a path can run over
L1_KEY, L2_KEY = "train.grafting.l1", "train.l2"


@dataclass(frozen=True)
class MethodEntry:
    """One training method.

    Attributes
    ----------
    name : str
        Its ``train.method`` value.
    fit : str
        ``"module:function"`` of its fit, ``(TrainingContext) -> FitResult``
        (``selection/base.py``); imported on first use (:meth:`fit_function`).
    family : str
        baseline, grafting, ifs, bayes or lattice: the config section and
        docs/methods page it belongs to.
    summary : str
        One line for the docs and help.
    path : str or None
        The penalty a regularization path runs over (``train.choice.path``,
        choice/path.py): ``"l1"`` (gamma1, with an elastic-net grid over
        gamma2) or ``"l2"`` (gamma2); None: the method has no path.
    best_stage : bool
        Whether it keeps its best held-out stage (``train.choice.best_stage``)
        and k folds choose its stage count (choice/folds.py).
    combination : str or None
        ``"module:function"`` of its fit with combination features
        (``train.grafting.combination_degree > 1``), which ``train()`` runs
        in place of ``fit`` then; None: it searches none (and ignores the key).
    warm_start : bool
        Whether its fit starts from ``TrainingContext.start`` (a previous
        model's weights); others ignore it.
    penalty_keys : tuple or None
        The schema keys MLlib's penalty ``regParam * (alpha ||w||_1 + (1 -
        alpha)/2 ||w||^2)`` sets: ``(l1 key, l2 key)``, the l1 key None when
        the method has an l2 penalty only (``alpha`` must be 0); None: no
        such penalty (``ml/params.py`` ``penalty_keys``).
    ml_params : tuple of str
        Which of the optional pyspark.ml Params (``ML_PARAMS``) it reads;
        the estimators refuse the others when set (ml/params.py).
    check : callable or None
        ``check(train_config)`` raises ConfigError for a configuration the
        method cannot run (called by ``TrainConfig``, after its keys).
    """

    name: str
    fit: str
    family: str
    summary: str
    path: str | None = None
    best_stage: bool = False
    combination: str | None = None
    warm_start: bool = False
    penalty_keys: tuple[str | None, str] | None = None
    ml_params: tuple[str, ...] = ()
    check: Callable[[Any], None] | None = None

    @property
    def folds(self) -> bool:
        """Whether k folds choose something for it: a stage count, or a
        path point (with ``train.choice.path``)."""
        return self.best_stage or self.path is not None

    @property
    def elastic(self) -> bool:
        """Whether MLlib's elasticNetParam may be above 0 (an l1 part)."""
        return self.penalty_keys is not None and self.penalty_keys[0] is not None

    def fit_function(self, combination: bool = False) -> Callable:
        """Its fit function, ``(TrainingContext) -> FitResult``: with
        ``combination`` (``train.grafting.combination_degree > 1``) its
        combination-features fit, when it has one."""
        name = self.combination if combination and self.combination else self.fit
        module, _, function = name.partition(":")
        return getattr(importlib.import_module(module), function)


def _needs_cutoff(cfg: Any) -> None:
    if cfg.cutoff < 1:
        raise ConfigError(
            f"train.cutoff: method {cfg.method!r} needs train.cutoff >= 1, got {cfg.cutoff}"
        )


def _needs_l2(cfg: Any) -> None:
    if not cfg.l2 > 0:
        raise ConfigError(f"train.l2: method {cfg.method!r} needs train.l2 > 0, got {cfg.l2}")


def _binary_atoms(cfg: Any) -> None:
    if cfg.standardize:
        raise ConfigError(
            f"train.standardize: method {cfg.method!r} works on binary atoms and their "
            "conjunctions; set train.standardize = false"
        )


_METHODS = "sparkmaxent.methods"
_L2_ONLY = (None, L2_KEY)
#: the pyspark.ml Params only some methods read (``MethodEntry.ml_params``)
ML_PARAMS = ("l1", "l2", "nBest", "maxRounds", "maxFeatures")
_STAGES = ("l2", "maxRounds", "maxFeatures")  # ifs, sgc: l2 of re-estimation

#: every method by its ``train.method`` name, in the order the docs list them
METHODS: dict[str, MethodEntry] = {
    e.name: e
    for e in (
        MethodEntry(
            "mle",
            f"{_METHODS}.baselines:fit_mle",
            "baseline",
            "Maximum likelihood over every candidate feature, no penalty.",
        ),
        MethodEntry(
            "l2",
            f"{_METHODS}.baselines:fit_l2",
            "baseline",
            "Gaussian prior: every candidate feature, gamma2/2 ||w||^2 (train.l2).",
            path="l2",
            penalty_keys=_L2_ONLY,
            ml_params=("l2",),
        ),
        MethodEntry(
            "cutoff",
            f"{_METHODS}.baselines:fit_cutoff",
            "baseline",
            "l2 over the features seen at least train.cutoff times.",
            penalty_keys=_L2_ONLY,
            check=_needs_cutoff,
            ml_params=("l2",),
        ),
        MethodEntry(
            "grafting",
            f"{_METHODS}.grafting:fit_grafting",
            "grafting",
            "l1 n-best grafting (gamma1 train.grafting.l1, elastic net with "
            "train.grafting.elastic_l2), optionally over combination features.",
            path="l1",
            combination=f"{_METHODS}.combination:fit_combination",
            warm_start=True,
            penalty_keys=(L1_KEY, "train.grafting.elastic_l2"),
            ml_params=("l1", "l2", "nBest", "maxRounds"),
        ),
        MethodEntry(
            "mle-ifs",
            f"{_METHODS}.grafting:fit_mle_ifs",
            "grafting",
            "Grafting's rounds without l1: a gradient threshold, no penalty.",
            ml_params=("nBest", "maxRounds"),
        ),
        MethodEntry(
            "l2-ifs",
            f"{_METHODS}.grafting:fit_l2_ifs",
            "grafting",
            "Grafting's rounds without l1: a gradient threshold, l2 penalty.",
            penalty_keys=_L2_ONLY,
            check=_needs_l2,
            ml_params=("l2", "nBest", "maxRounds"),
        ),
        MethodEntry(
            "ifs",
            f"{_METHODS}.ifs:fit_ifs",
            "ifs",
            "Incremental feature selection: each stage adds the candidate of largest "
            "approximate gain (Berger et al. 1996; Zhou et al. 2003).",
            best_stage=True,
            ml_params=_STAGES,
        ),
        MethodEntry(
            "sgc",
            f"{_METHODS}.ifs:fit_sgc",
            "ifs",
            "Selective gain computation: IFS with stale gains as upper bounds (Zhou et al. 2003).",
            best_stage=True,
            ml_params=_STAGES,
        ),
        MethodEntry(
            "sgc-lookahead",
            f"{_METHODS}.ifs:fit_sgc_lookahead",
            "ifs",
            "SGC that also refreshes the next train.ifs.lookahead candidates per stage.",
            best_stage=True,
            ml_params=_STAGES,
        ),
        MethodEntry(
            "bayes-factor",
            f"{_METHODS}.bayes:fit_bayes_factor",
            "bayes",
            "Approximate Bayes-factor feature selection (Daume III 2004).",
            best_stage=True,
            ml_params=("maxRounds", "maxFeatures"),
        ),
        MethodEntry(
            "lattice",
            f"{_METHODS}.lattice.method:fit_lattice",
            "lattice",
            "The optimized feature lattice of atom conjunctions (Mikheev 1998).",
            penalty_keys=_L2_ONLY,
            check=_binary_atoms,
            ml_params=("l2", "maxRounds"),
        ),
    )
}
#: ``train.method``'s default
DEFAULT_METHOD = "l2"
#: the method MLlib's LogisticRegression fits, by whether its penalty has an
#: l1 part (elasticNetParam > 0): the pyspark.ml estimators' method "auto"
MLLIB_METHOD = {True: "grafting", False: DEFAULT_METHOD}


def method(name: str) -> MethodEntry:
    """The entry of ``train.method = name`` (ConfigError naming the known ones)."""
    try:
        return METHODS[name]
    except KeyError:
        raise ConfigError(
            f"train.method: unknown method {name!r}; expected one of {', '.join(METHODS)}"
        ) from None


def names(where: Callable[[MethodEntry], bool]) -> tuple[str, ...]:
    """The methods whose entries satisfy ``where``, in registry order, e.g.
    ``names(lambda m: m.best_stage)``."""
    return tuple(n for n, e in METHODS.items() if where(e))


def reading(param: str) -> tuple[str, ...]:
    """The methods that read the pyspark.ml Param ``param`` (``ML_PARAMS``)."""
    return names(lambda m: param in m.ml_params)


__all__ = [
    "DEFAULT_METHOD",
    "L1_KEY",
    "L2_KEY",
    "METHODS",
    "ML_PARAMS",
    "MLLIB_METHOD",
    "MethodEntry",
    "method",
    "names",
    "reading",
]

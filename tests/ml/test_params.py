"""Every Param of MaxEntClassifier is checked when set (by the config
schema) and maps onto one configuration key."""

from __future__ import annotations

import pytest

from sparkmaxent.config import ConfigError
from sparkmaxent.ml import MaxEntClassifier
from sparkmaxent.ml.params import SCHEMA_PARAMS, schema_field
from sparkmaxent.train import METHODS

BAD = [
    ("method", "lasso", r"method \(train.method\): expected one of \[.*'grafting'"),
    ("method", 3, r"method \(train.method\): expected a str"),
    ("l1", 0.0, r"l1 \(train.grafting.l1\): expected a value > 0"),
    ("l1", float("nan"), r"l1 \(train.grafting.l1\): expected a finite number"),
    ("l2", -1.0, r"l2 \(train.l2\): expected a value >= 0"),
    ("nBest", 0, r"nBest \(train.grafting.n_best\): expected a value >= 1"),
    ("nBest", 2.5, r"nBest \(train.grafting.n_best\): expected a int"),
    ("maxRounds", -1, r"maxRounds \(train.selection.max_rounds\): expected a value >= 0"),
    ("maxFeatures", -2, r"maxFeatures \(train.selection.max_features\): expected a value >= 0"),
    ("standardization", "yes", r"standardization \(train.standardize\): expected a bool"),
    ("tol", 0.0, r"tol \(train.gtol\): expected a value > 0"),
    ("maxIter", 0, r"maxIter \(train.max_iter\): expected a value >= 1"),
    ("regParam", -0.1, r"regParam: expected a value >= 0"),
    ("elasticNetParam", 1.5, r"elasticNetParam: expected a value <= 1"),
    ("config", {"train.nope": 1}, r"config: train: unknown key\(s\) \['nope'\]"),
    ("config", {"train.ifs.batch": 0}, r"train.ifs.batch: expected a value >= 1"),
    ("config", {"l2": 1.0}, r"expected keys like 'train.l2'"),
    ("config", [1], r"config: expected a dict"),
]


@pytest.mark.parametrize("name,value,message", BAD, ids=[f"{b[0]}={b[1]!r}" for b in BAD])
def test_every_param_is_checked_when_set(name, value, message):
    with pytest.raises(ValueError, match=message):
        MaxEntClassifier(**{name: value})
    est = MaxEntClassifier()
    with pytest.raises(ValueError, match=message):
        est.set(est.getParam(name), value)


def test_column_params_are_type_checked():
    with pytest.raises(TypeError, match="featuresCol"):
        MaxEntClassifier(featuresCol=3)


def test_every_registered_method_is_accepted():
    for method in METHODS:
        cfg = MaxEntClassifier(method=method, config={"train.cutoff": 1}).training_config()
        assert cfg.train.method == method


def _key(cfg, dotted: str):
    section = cfg.to_dict()
    for part in dotted.split("."):
        section = section[part]
    return section


def test_params_map_onto_their_schema_keys():
    grafting = {
        "method": "grafting",
        "l1": 0.5,
        "nBest": 7,
        "maxRounds": 3,
        "standardization": True,
        "tol": 1e-5,
        "maxIter": 42,
        "binary": True,
    }
    ifs = {"method": "ifs", "l2": 0.25, "maxFeatures": 11}
    assert set(grafting) | set(ifs) == set(SCHEMA_PARAMS)
    for values in (grafting, ifs):
        cfg = MaxEntClassifier(**values).training_config()
        for name, value in values.items():
            assert _key(cfg, SCHEMA_PARAMS[name]) == value, name
    # grafting reads l2 as its elastic-net gamma2
    cfg = MaxEntClassifier(method="grafting", l1=0.5, l2=0.25).training_config()
    assert cfg.train.grafting.elastic_l2 == 0.25 and cfg.train.l2 == schema_field("train.l2")[0]


def test_defaults_are_the_schemas():
    est = MaxEntClassifier()
    cfg = est.training_config()
    assert est.getOrDefault("nBest") == cfg.train.grafting.n_best
    assert est.getOrDefault("method") == "auto" and cfg.train.method == "l2"
    assert cfg == MaxEntClassifier(config={}).training_config()


@pytest.mark.parametrize(
    "params,method",
    [
        ({}, "l2"),
        ({"l2": 0.1}, "l2"),
        ({"regParam": 0.1}, "l2"),  # MLlib: elasticNetParam 0 is pure l2
        ({"l1": 0.01}, "grafting"),
        ({"regParam": 0.1, "elasticNetParam": 1.0}, "grafting"),
        ({"regParam": 0.1, "elasticNetParam": 0.5}, "grafting"),
        ({"config": {"train.method": "sgc"}}, "sgc"),
        ({"method": "ifs"}, "ifs"),
    ],
)
def test_auto_method_follows_the_penalty_params(params, method):
    assert MaxEntClassifier(**params).training_config().train.method == method


@pytest.mark.parametrize(
    "params,message",
    [
        ({"method": "l2", "l1": 0.01}, r"l1: method 'l2' does not use it \(it applies to grafting"),
        ({"method": "sgc", "l1": 0.01}, r"l1: method 'sgc' does not use it"),
        ({"method": "grafting", "maxFeatures": 5}, r"maxFeatures: method 'grafting' does not"),
        ({"method": "l2", "nBest": 5}, r"nBest: method 'l2' does not use it"),
        ({"method": "mle", "l2": 0.1}, r"l2: method 'mle' does not use it"),
        ({"method": "l2", "maxRounds": 3}, r"maxRounds: method 'l2' does not use it"),
        ({"l2": 0.1, "maxFeatures": 3}, r"maxFeatures: method 'l2' does not use it"),
        (
            {"method": "grafting", "regParam": 0.01},
            r"elasticNetParam: method 'grafting' takes its l1 part .* is 0.0",
        ),
    ],
)
def test_a_param_the_method_does_not_read_is_refused(params, message):
    with pytest.raises(ConfigError, match=message):
        MaxEntClassifier(**params).training_config()


def test_a_grid_mixing_methods_is_checked_before_any_fit():
    est = MaxEntClassifier()
    good = [
        {est.method: "l2", est.regParam: 0.1},
        {est.method: "grafting", est.regParam: 0.01, est.elasticNetParam: 1.0},
    ]
    methods = [c.train.method for c in est.grid_configs(good)]
    assert methods == ["l2", "grafting"]
    bad = [{est.method: m, est.regParam: 0.01} for m in ("l2", "grafting")]
    with pytest.raises(ConfigError, match=r"param map 1 \{'method': 'grafting'.*elasticNetParam"):
        est.grid_configs(bad)


def test_config_param_passes_method_keys_and_conflicts_are_refused():
    cfg = MaxEntClassifier(
        method="ifs", config={"train.ifs.gain_prior_variance": 2.0, "data.in_process_max_events": 0}
    ).training_config()
    assert cfg.train.ifs.gain_prior_variance == 2.0 and cfg.data.in_process_max_events == 0
    with pytest.raises(ConfigError, match=r"l2 and config\['train.l2'\] both set"):
        MaxEntClassifier(l2=1.0, config={"train.l2": 2.0}).training_config()
    # cross-key rules of the schema apply to the whole configuration
    with pytest.raises(ConfigError, match="method 'cutoff' needs train.cutoff >= 1"):
        MaxEntClassifier(method="cutoff").training_config()


def test_reg_param_is_mllibs_elastic_net():
    cfg = MaxEntClassifier(method="grafting", regParam=0.1, elasticNetParam=0.75).training_config()
    assert cfg.train.grafting.l1 == pytest.approx(0.075)
    assert cfg.train.grafting.elastic_l2 == pytest.approx(0.025)
    cfg = MaxEntClassifier(method="l2", regParam=0.3).training_config()
    assert cfg.train.l2 == 0.3
    with pytest.raises(ConfigError, match="elasticNetParam: method 'l2' has an l2 penalty only"):
        MaxEntClassifier(method="l2", regParam=0.3, elasticNetParam=0.5).training_config()
    with pytest.raises(ConfigError, match="regParam: method 'sgc' has no regParam-like penalty"):
        MaxEntClassifier(method="sgc", regParam=0.3).training_config()
    with pytest.raises(ConfigError, match="regParam/elasticNetParam set train.l2"):
        MaxEntClassifier(method="l2", regParam=0.3, l2=0.1).training_config()
    with pytest.raises(ConfigError, match=r"regParam: method 'grafting' needs regParam > 0"):
        MaxEntClassifier(method="grafting", regParam=0.0, elasticNetParam=1.0).training_config()


def test_numpy_values_from_a_grid_are_accepted():
    np = pytest.importorskip("numpy")
    est = MaxEntClassifier(l1=np.float64(0.1), nBest=np.int64(4))
    assert type(est.getOrDefault("l1")) is float and est.getOrDefault("nBest") == 4

"""The configuration schema: every key checked when a section is built,
errors naming the key, overrides at any depth, the generated defaults."""

from __future__ import annotations

import pytest

from sparkmaxent.config import (
    Config,
    ConfigError,
    TrainConfig,
    config_from_dict,
    digest,
    load_config,
    train_config,
    train_keys,
)
from sparkmaxent.config.reference import defaults_toml


@pytest.mark.parametrize(
    "override, message",
    [
        ('train.standardize="false"', "train.standardize: expected a bool, got 'false'"),
        ("train.l2=abc", "train.l2: expected a float, got 'abc'"),
        ("train.l2=nan", "train.l2: expected a finite number, got nan"),
        ("train.grafting.l1=inf", "train.grafting.l1: expected a finite number"),
        ("train.grafting.l1=0", "train.grafting.l1: expected a value > 0, got 0.0"),
        ("train.memory=0", "train.memory: expected a value >= 1, got 0"),
        ("train.memory=2.5", "train.memory: expected a int, got 2.5"),
        ("train.selection.max_rounds=-1", "train.selection.max_rounds: expected a value >= 0"),
        (
            "train.grafting.round_tol_ratio=1",
            "train.grafting.round_tol_ratio: expected a value < 1",
        ),
        ("train.bayes.signature_bits=12", "train.bayes.signature_bits: expected a multiple of 8"),
        ("train.method=graft", "train.method: expected one of ['mle', 'l2'"),
        ("train.selection.solver=cg", "train.selection.solver: expected one of"),
        ("data.partitions=-2", "data.partitions: expected a value >= 0"),
        ("output.overwrite=1", "output.overwrite: expected a bool, got 1"),
    ],
)
def test_a_bad_value_names_its_key(override, message):
    with pytest.raises(ConfigError, match=None) as e:
        load_config(None, [override])
    assert message in str(e.value) and str(e.value).startswith("--set: ")


def test_an_unknown_key_says_where_a_key_of_that_name_lives():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["train.l1=1e-4"])
    assert "unknown key(s) ['l1']" in str(e.value)
    assert "l1 is a key of [train.grafting]" in str(e.value)
    with pytest.raises(ConfigError, match="unknown section"):
        config_from_dict({"trian": {}})
    with pytest.raises(ConfigError, match="train.grafting: unknown key"):
        load_config(None, ["train.grafting.nonsense=1"])


def test_method_rules_that_span_keys():
    with pytest.raises(ConfigError, match="method 'cutoff' needs train.cutoff >= 1"):
        train_config(method="cutoff")
    with pytest.raises(ConfigError, match="method 'l2-ifs' needs train.l2 > 0"):
        train_config(method="l2-ifs", l2=0.0)
    assert train_config(method="cutoff", cutoff=3).cutoff == 3


def test_overrides_reach_any_depth_and_ints_become_floats(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[train]\nmethod = "grafting"\n[train.grafting]\nl1 = 1e-3\nn_best = 5\n')
    cfg = load_config(
        str(f),
        [
            "train.grafting.l1=2",
            "train.selection.plots=false",
            'spark.conf={"spark.driver.memory" = "4g"}',
        ],
    )
    assert cfg.train.method == "grafting" and cfg.train.grafting.n_best == 5
    assert cfg.train.grafting.l1 == 2.0 and isinstance(cfg.train.grafting.l1, float)
    assert cfg.train.selection.plots is False
    assert cfg.spark.conf == {"spark.driver.memory": "4g"}
    with pytest.raises(ConfigError, match="expected SECTION.KEY=VALUE"):
        load_config(None, ["l2=1"])


def test_config_files_that_cannot_be_read_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(str(tmp_path))
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(str(tmp_path / "missing.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\nmethod = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(str(bad))


def test_train_config_and_train_keys_are_inverse():
    cfg = train_config(
        method="bayes-factor", per_round=4, model_prior="empirical-bayes", max_features=9, l2=1e-3
    )
    assert cfg.bayes.per_round == 4 and cfg.selection.max_features == 9
    keys = train_keys(cfg)
    assert train_config(**keys) == cfg
    assert train_config(cfg, per_round=2).bayes.per_round == 2
    with pytest.raises(ConfigError, match="unknown key 'bf_per_round'"):
        train_config(bf_per_round=2)


def test_the_generated_defaults_load_to_the_default_config(tmp_path):
    f = tmp_path / "defaults.toml"
    f.write_text(defaults_toml())
    assert load_config(str(f)) == Config()


def test_the_digest_ignores_only_the_excluded_keys():
    a, b = TrainConfig(), train_config(max_rounds=3)
    assert digest(a) != digest(b)
    assert digest(a, ("max_rounds",)) == digest(b, ("max_rounds",))


def test_train_key_names_are_unique_across_sections():
    # train_config(**flat) relies on it: a name in two sections would land in one silently
    from collections import Counter

    from sparkmaxent.config.load import SECTIONS, _key_names

    names = Counter(
        n for path, cls in SECTIONS.items() if path.startswith("train") for n in _key_names(cls)
    )
    assert [n for n, c in names.items() if c > 1] == []


@pytest.mark.parametrize(
    "override,message",
    [
        ("data.synthetic.n_event=5", "data.synthetic: unknown key(s) ['n_event']; expected"),
        ("data.synthetic.n_events=abc", "data.synthetic.n_events: expected an integer, got 'abc'"),
        ("data.synthetic.n_events=2.5", "data.synthetic.n_events: expected an integer, got 2.5"),
        ("data.synthetic.seed=true", "data.synthetic.seed: expected an integer, got True"),
        ("data.synthetic.zipf_exponent=nan", "zipf_exponent: expected a finite number, got nan"),
        ("data.synthetic.n_labels=1", "data.synthetic: expected n_labels >= 2, got 1"),
    ],
)
def test_a_bad_synthetic_spec_is_a_config_error_naming_the_key(override, message):
    """issue 40: a bad data.synthetic field is exit 3 naming it when the
    configuration is read (it was a TypeError or ValueError, exit 1, once
    the pipeline reached the generator)."""
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert message in str(e.value), str(e.value)
    spec = load_config(None, ["data.synthetic.n_events=7", "data.synthetic.weight_scale=3"])
    assert spec.data.synthetic == {"n_events": 7, "weight_scale": 3.0}

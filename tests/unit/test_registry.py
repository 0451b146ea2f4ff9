"""The method registry (sparkmaxent/registry.py): one entry per method, and
everything that lists methods derived from it."""

from __future__ import annotations

import dataclasses

import pytest

from sparkmaxent import registry
from sparkmaxent.config import ConfigError, TrainConfig, train_config
from sparkmaxent.config.rules import rule_of


def test_the_schema_offers_exactly_the_registered_methods():
    field = next(f for f in dataclasses.fields(TrainConfig) if f.name == "method")
    assert rule_of(field).choices == tuple(registry.METHODS)
    assert TrainConfig().method == registry.DEFAULT_METHOD in registry.METHODS


@pytest.mark.parametrize("name", list(registry.METHODS))
def test_every_entry_names_a_fit_function(name):
    entry = registry.METHODS[name]
    fit = entry.fit_function()
    assert callable(fit)
    assert f"{fit.__module__}:{fit.__name__}" == entry.fit
    assert entry.family in {"baseline", "grafting", "ifs", "bayes", "lattice"}
    assert entry.summary.endswith(".")


def test_combination_features_dispatch_to_their_own_fit():
    """``train.grafting.combination_degree > 1`` runs the entry's
    combination fit (methods/combination.py); plain grafting's fit lives in
    methods/grafting.py, so its path enters no module twice; a method
    without combination features keeps its fit."""
    from sparkmaxent.methods import combination, grafting

    entry = registry.METHODS["grafting"]
    assert entry.fit_function() is grafting.fit_grafting
    assert entry.fit_function(combination=True) is combination.fit_combination
    assert registry.names(lambda m: m.combination is not None) == ("grafting",)
    plain = registry.METHODS["mle-ifs"]
    assert plain.fit_function(combination=True) is plain.fit_function() is grafting.fit_mle_ifs


def test_train_dispatches_through_the_registry():
    from sparkmaxent import train

    assert train.METHODS is registry.METHODS


def test_path_and_fold_lists_are_derived_from_the_entries():
    from sparkmaxent.choice.folds import STAGE_METHODS
    from sparkmaxent.choice.path import PATH_METHODS

    assert set(PATH_METHODS) == {n for n, e in registry.METHODS.items() if e.path}
    assert set(STAGE_METHODS) == {n for n, e in registry.METHODS.items() if e.best_stage}
    assert not set(PATH_METHODS) & set(STAGE_METHODS)
    assert all(registry.METHODS[n].folds for n in PATH_METHODS + STAGE_METHODS)


def test_an_unknown_method_is_named_with_the_known_ones():
    with pytest.raises(ConfigError, match="unknown method 'nope'; expected one of mle, l2"):
        registry.method("nope")
    with pytest.raises(ConfigError, match="train.method"):
        train_config(method="nope")


def test_each_method_runs_its_own_config_check():
    checked = {n for n, e in registry.METHODS.items() if e.check is not None}
    assert checked == {"cutoff", "l2-ifs", "lattice"}
    with pytest.raises(ConfigError, match="method 'cutoff' needs train.cutoff >= 1"):
        train_config(method="cutoff", cutoff=0)
    with pytest.raises(ConfigError, match="method 'l2-ifs' needs train.l2 > 0"):
        train_config(method="l2-ifs", l2=0.0)
    with pytest.raises(ConfigError, match="method 'lattice' works on binary atoms"):
        train_config(method="lattice", standardize=True)
    # the same values are fine for a method without that check
    assert train_config(method="l2", cutoff=0, l2=0.0, standardize=True).method == "l2"


def test_penalty_keys_name_schema_keys():
    from sparkmaxent.ml.params import schema_field

    for entry in registry.METHODS.values():
        for key in entry.penalty_keys or ():
            if key is not None:
                schema_field(key)  # raises for a key the schema does not have
    assert registry.names(lambda m: m.elastic) == ("grafting",)


def test_the_ml_params_each_method_reads_come_from_its_entry():
    from sparkmaxent.ml.params import USED_BY

    assert set(USED_BY) == set(registry.ML_PARAMS)
    assert USED_BY["l1"] == ("grafting",)
    assert set(USED_BY["nBest"]) == {"grafting", "mle-ifs", "l2-ifs"}
    assert set(USED_BY["maxRounds"]) == set(registry.METHODS) - {"mle", "l2", "cutoff"}
    assert set(USED_BY["maxFeatures"]) == set(registry.names(lambda m: m.best_stage))
    for entry in registry.METHODS.values():
        assert set(entry.ml_params) <= set(registry.ML_PARAMS), entry.name
        # a method with a regParam-like penalty reads the l2 Param (its gamma2)
        assert entry.penalty_keys is None or "l2" in entry.ml_params, entry.name
    assert registry.MLLIB_METHOD == {True: "grafting", False: "l2"}

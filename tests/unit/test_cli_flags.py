"""Command-line flags that mirror configuration keys: each one overrides
its key when given, and leaves the configuration's value otherwise
(``cli.resolve_config``, the one place they meet)."""

from __future__ import annotations

import functools

import pytest

from sparkmaxent.cli import CONFIG_KEYS, build_parser, resolve_config
from sparkmaxent.config import load_config
from sparkmaxent.errors import ConfigError

SET = ["--set", "data.prepare_cutoff=4", "--set", "data.partitions=5", "--set", "data.binary=true"]
PREPARE = ["prepare", "--input", "a.txt", "--format", "maxent", "--output", "o"]


def resolved(argv: list[str]):
    args = build_parser().parse_args(argv)
    return args, resolve_config(args, load_config(None, args.overrides))


def test_unset_flags_leave_the_configuration_and_given_flags_override_it():
    _, cfg = resolved([*PREPARE, *SET])
    assert (cfg.data.prepare_cutoff, cfg.data.partitions, cfg.data.binary) == (4, 5, True)
    assert cfg.data.options == {} and cfg.spark.master == ""
    flags = ["--cutoff", "1", "--partitions", "2", "--no-binary", "--option", "mode=basenp"]
    _, cfg = resolved([*PREPARE, *SET, *flags, "--master", "local[1]", "--label-col", "y"])
    assert (cfg.data.prepare_cutoff, cfg.data.partitions, cfg.data.binary) == (1, 2, False)
    assert cfg.data.options == {"mode": "basenp"} and cfg.spark.master == "local[1]"
    assert cfg.data.label_col == "y"


def test_train_and_pipeline_flags_are_overrides_of_their_keys():
    argv = ["train", "--train", "t", "--heldout", "h", "--output", "o", "--allow-unconverged"]
    _, cfg = resolved(argv)
    assert (cfg.data.train, cfg.data.heldout, cfg.output.dir) == ("t", "h", "o")
    assert cfg.output.allow_unconverged is True
    _, cfg = resolved(["pipeline", "--heldout-fraction", "0.2", "--remote", "sc://h:1"])
    assert cfg.data.heldout_fraction == 0.2 and cfg.spark.remote == "sc://h:1"
    _, cfg = resolved(["pipeline", "--set", "output.dir=x"])
    assert cfg.output.dir == "x" and cfg.data.heldout_fraction == 0.0


def test_every_overriding_flag_names_a_key_of_the_schema():
    from sparkmaxent.config.load import with_values

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        keys = p.get_default(CONFIG_KEYS)
        assert keys, name
        for key in keys.values():
            cfg = load_config()
            value = functools.reduce(getattr, key.split("."), cfg)
            assert with_values(cfg, {key: value}) == cfg


def test_a_bad_value_is_a_config_error_naming_the_flag():
    with pytest.raises(ConfigError, match=r"--partitions: data\.partitions: expected a value >= 0"):
        resolved([*PREPARE, "--partitions", "-2"])
    with pytest.raises(ConfigError, match="no such configuration key"):
        from sparkmaxent.config.load import with_values

        with_values(load_config(), {"data.nope": 1})

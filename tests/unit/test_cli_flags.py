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


def test_predict_and_evaluate_flags_build_one_scoring_options():
    """predict's and evaluate's reading flags become one ScoringOptions over
    the [data] section: reader options, table columns, the unknown-feature
    check and the in-process sizes."""
    from sparkmaxent.cli import _scoring
    from sparkmaxent.data.options import MAX_UNKNOWN

    given = ["--input", "t.txt", "--format", "maxent", "--model", "m"]
    flags = ["--option", "mode=basenp", "--key-col", "id", "--max-unknown", "0.2"]
    sizes = ["--set", "data.in_process_max_events=7", "--set", "data.in_process_bytes_per_event=9"]
    args, cfg = resolved(["predict", *given, "--output", "o", *flags, "--allow-unknown", *sizes])
    s = _scoring(args, cfg)
    assert s.options == {"mode": "basenp"} and s.columns is not None and s.columns.key == "id"
    assert (s.max_unknown, s.allow_unknown, s.overwrite) == (0.2, True, False)
    assert (s.in_process_max_events, s.in_process_bytes_per_event) == (7, 9)
    args, cfg = resolved(["evaluate", *given, "--set", "data.options={mode='basenp'}"])
    s = _scoring(args, cfg)
    assert s.options == {"mode": "basenp"} and (s.max_unknown, s.allow_unknown) == (
        MAX_UNKNOWN,
        False,
    )
    assert s.in_process_max_events == cfg.data.in_process_max_events > 0


def test_predict_sets_its_keywords_over_its_settings(tmp_path, monkeypatch):
    """api.predict reads its input as ``settings`` say, each keyword over
    them: ``overwrite=False`` refuses an existing output that
    ``settings.overwrite`` alone would replace; a bad value is refused."""
    from sparkmaxent import api
    from sparkmaxent.data.options import ScoringOptions
    from sparkmaxent.errors import InputError

    out = tmp_path / "preds"
    out.mkdir()
    reached = []

    def prepared(spark, model_dir, data, fmt, workdir, settings):
        reached.append(settings)
        raise RuntimeError("stop here")

    monkeypatch.setattr(api, "prepared_for_model", prepared)
    mine = ScoringOptions(overwrite=True, max_unknown=0.1, options={"mode": "basenp"})
    with pytest.raises(InputError, match="exists"):
        api.predict(None, None, "m", "t.txt", str(out), "maxent", settings=mine, overwrite=False)
    assert reached == []
    with pytest.raises(RuntimeError, match="stop here"):
        api.predict(None, None, "m", "t.txt", str(out), "maxent", settings=mine)
    assert reached == [mine]
    with pytest.raises(InputError, match="max_unknown"):
        api.predict(None, None, "m", "t.txt", str(out), "maxent", max_unknown=2.0)

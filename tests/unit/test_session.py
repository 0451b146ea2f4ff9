"""The Spark session's settings: spark-submit/spark-defaults over the TOML over
the project's defaults, and loopback binding only for local masters
(sparkmaxent/backends/session.py; no Spark here)."""

from __future__ import annotations

import pytest

from sparkmaxent.backends.session import (
    DEFAULT_CONF,
    LOCAL_JVM_CONF,
    LOOPBACK_CONF,
    is_local_master,
    plan_session,
    provided_conf,
    read_properties,
    spark_defaults_file,
)

SHUFFLE = "spark.sql.shuffle.partitions"
ARROW = "spark.sql.execution.arrow.pyspark.enabled"


def test_defaults_alone():
    plan = plan_session("local[2]", None)
    assert plan.settings[SHUFFLE] == DEFAULT_CONF[SHUFFLE]
    assert plan.settings[ARROW] == "true"
    assert plan.master == "local[2]"
    assert plan.settings["spark.master"] == "local[2]"


def test_cached_blocks_are_stored_in_chunks_of_the_cache_rows_on_every_master():
    from sparkmaxent.backends.chunked import CACHE_CHUNK_BYTES

    for master in ("local[2]", "spark://10.0.0.1:7077", "yarn"):
        plan = plan_session(master, None)
        assert plan.settings["spark.storage.unrollMemoryThreshold"] == str(CACHE_CHUNK_BYTES)


def test_the_ui_is_not_turned_off_by_default():
    plan = plan_session("local[2]", None)
    assert "spark.ui.enabled" not in plan.settings
    assert "spark.ui.enabled" not in plan.builder_conf
    off = plan_session("local[2]", {"spark.ui.enabled": "false"})
    assert off.builder_conf["spark.ui.enabled"] == "false"


def test_toml_wins_over_defaults():
    plan = plan_session("local[2]", {SHUFFLE: 64, "spark.driver.memory": "4g"})
    assert plan.settings[SHUFFLE] == "64"  # values are strings for SparkConf
    assert plan.builder_conf[SHUFFLE] == "64"
    assert plan.builder_conf["spark.driver.memory"] == "4g"
    assert plan.settings[ARROW] == "true"


def test_spark_submit_wins_over_toml_and_defaults():
    provided = {SHUFFLE: "3", ARROW: "false", "spark.master": "local[1]"}
    plan = plan_session("local[2]", {SHUFFLE: "64"}, provided, under_submit=True)
    assert plan.settings[SHUFFLE] == "3"
    assert plan.settings[ARROW] == "false"
    # the builder does not set what spark-submit set: Spark's conf already has it
    assert SHUFFLE not in plan.builder_conf and ARROW not in plan.builder_conf
    assert plan.master is None
    assert plan.settings["spark.master"] == "local[1]"
    assert plan.settings["spark.ui.showConsoleProgress"] == "false"  # untouched default


def test_spark_defaults_file_wins_outside_spark_submit(tmp_path, monkeypatch):
    (tmp_path / "spark-defaults.conf").write_text(
        "# a comment\n"
        "spark.sql.shuffle.partitions   5\n"
        "spark.driver.host=10.0.0.7\n"
        "! another comment\n"
        "\n"
        "spark.executor.memory : 2g\n"
        "other.key  ignored\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark_defaults_file() == str(tmp_path / "spark-defaults.conf")
    provided = provided_conf(under_submit=False)
    assert provided == {
        SHUFFLE: "5",
        "spark.driver.host": "10.0.0.7",
        "spark.executor.memory": "2g",
    }
    plan = plan_session("local[2]", {SHUFFLE: "64"}, provided)
    assert plan.settings[SHUFFLE] == "5"
    assert plan.settings["spark.driver.host"] == "10.0.0.7"  # wins over loopback
    assert plan.settings["spark.driver.bindAddress"] == "127.0.0.1"
    assert "spark.driver.host" not in plan.builder_conf


def test_no_spark_defaults_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark_defaults_file() is None
    assert provided_conf(under_submit=False) == {}


def test_read_properties_separators(tmp_path):
    path = tmp_path / "p.conf"
    path.write_text("a 1\nb=2\nc:3\nd   =  4\ne\tx y\nf\n")
    assert read_properties(str(path)) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "x y",
        "f": "",
    }


@pytest.mark.parametrize(
    "master, local",
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[4,2]", True),
        ("local-cluster[2,1,1024]", True),
        ("spark://127.0.0.1:7077", False),
        ("spark://host:7077", False),
        ("yarn", False),
        ("k8s://https://api:6443", False),
        ("mesos://m:5050", False),
        ("localhost", False),
        ("", False),
        (None, False),
    ],
)
def test_is_local_master(master, local):
    assert is_local_master(master) is local


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]"])
def test_local_master_binds_to_loopback(master, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")  # not what decides
    plan = plan_session(master, None)
    assert plan.loopback
    for key, value in LOOPBACK_CONF.items():
        assert plan.settings[key] == value


@pytest.mark.parametrize(
    "master", ["spark://127.0.0.1:7077", "spark://node1:7077", "yarn", "k8s://https://k:6443"]
)
def test_remote_master_never_binds_to_loopback(master, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # not what decides either
    for plan in (
        plan_session(master, None),
        plan_session(None, None, {"spark.master": master}, under_submit=True),
        plan_session("local[2]", None, {"spark.master": master}, under_submit=True),
    ):
        assert not plan.loopback
        assert "spark.driver.host" not in plan.settings
        assert "spark.driver.bindAddress" not in plan.settings


def test_spark_submit_local_master_binds_to_loopback():
    plan = plan_session(None, None, {"spark.master": "local[2]"}, under_submit=True)
    assert plan.loopback
    assert plan.builder_conf["spark.driver.host"] == "127.0.0.1"


def test_no_master_binds_only_outside_spark_submit():
    assert plan_session(None, None).loopback  # pyspark's default: local[*]
    assert not plan_session(None, None, {}, under_submit=True).loopback


def test_binding_given_by_the_user_wins():
    plan = plan_session("local[2]", {"spark.driver.host": "192.168.1.5"})
    assert plan.settings["spark.driver.host"] == "192.168.1.5"
    plan = plan_session(
        None,
        None,
        {"spark.master": "local[1]", "spark.driver.bindAddress": "0.0.0.0"},
        under_submit=True,
    )
    assert plan.settings["spark.driver.bindAddress"] == "0.0.0.0"
    assert "spark.driver.bindAddress" not in plan.builder_conf


def test_app_name():
    # spark-submit names the application after the script unless --name is given
    plan = plan_session(
        None, None, {"spark.app.name": "train.py"}, True, "sparkmaxent-train", "/x/jobs/train.py"
    )
    assert plan.app_name == "sparkmaxent-train"
    plan = plan_session(
        None, None, {"spark.app.name": "nightly"}, True, "sparkmaxent-train", "/x/jobs/train.py"
    )
    assert plan.app_name == "nightly"
    plan = plan_session("local[1]", {"spark.app.name": "mine"}, None, False, "sparkmaxent")
    assert plan.app_name == "mine"
    assert "spark.app.name" not in plan.builder_conf


JVM_OPTIONS = "spark.driver.extraJavaOptions"


def test_a_local_master_gets_the_jvm_options_that_give_heap_back_unless_the_user_sets_them():
    assert plan_session("local[2]", None).builder_conf[JVM_OPTIONS] == LOCAL_JVM_CONF[JVM_OPTIONS]
    assert JVM_OPTIONS not in plan_session("spark://node1:7077", None).settings
    mine = "-XX:+UseParallelGC"
    assert plan_session("local[2]", {JVM_OPTIONS: mine}).settings[JVM_OPTIONS] == mine
    plan = plan_session(None, None, {"spark.master": "local[1]", JVM_OPTIONS: mine}, True)
    assert plan.settings[JVM_OPTIONS] == mine and JVM_OPTIONS not in plan.builder_conf


def test_the_local_jvm_options_start_a_java_17_jvm():
    """The installed Java accepts the options (an unknown or misspelt -XX
    flag stops the JVM, and with it the session, at start)."""
    import shutil
    import subprocess

    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH")
    options = LOCAL_JVM_CONF[JVM_OPTIONS].split()
    done = subprocess.run([java, *options, "-XX:+PrintFlagsFinal", "-version"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    flags = {line.split()[1]: line.split()[3] for line in done.stdout.splitlines()
             if line.count("=") == 1 and len(line.split()) >= 4}  # fmt: skip
    assert flags["MaxHeapFreeRatio"] == "30" and flags["MinHeapFreeRatio"] == "10"
    assert flags["UseSerialGC"] == "true" and flags["UseG1GC"] == "false"

"""Spark Connect: prepare, train (every selection method the issue names,
on the DataFrame backend), save, load and evaluate through a Connect
server on 127.0.0.1 give what a classic local session gives.

The Connect side runs as the CLI in a subprocess (``--remote`` or
``SPARK_REMOTE``): a Connect client session marks the whole Python process
as remote (pyspark's ``is_remote()``), which would turn the classic
session the other tests share into a broken one. The classic side runs in
this process, on the RDD backend (``train.backend = spark-rdd``), with
the same partitions, so both sum the same blocks in the same order.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from sparkmaxent import api
from sparkmaxent.config import Config
from sparkmaxent.config.load import train_config
from sparkmaxent.data import synthetic
from sparkmaxent.data.prepare import prepare
from sparkmaxent.data.schema import DatasetInfo
from sparkmaxent.model import VOCABULARY_DIR, MaxentModel

pytestmark = pytest.mark.connect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARTITIONS = 2
METHOD_SETTINGS = {
    "grafting": {"train.grafting.l1": "2e-3", "train.grafting.n_best": "5"},
    "l2": {"train.l2": "1e-3"},
    "mle": {"train.gtol": "1e-4"},  # fewer passes: the same iterates either way
    "ifs": {"train.selection.max_features": "6"},
    "sgc": {"train.selection.max_features": "6"},
    "bayes-factor": {"train.selection.max_features": "6"},
}


def _value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


@pytest.fixture(scope="module")
def server():
    pytest.importorskip("grpc", reason="the Spark Connect client needs the connect extra")
    from tests.e2e.connect import connect_server

    with connect_server(cores=2, memory="1g") as s:
        yield s


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """Generated train and test files in the maxent format (300 + 100 events)."""
    d = tmp_path_factory.mktemp("connect")
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=400,
            n_predicates=40,
            n_labels=3,
            active_per_event=5,
            n_support=5,
            n_copies=0,
            n_conjunctions=0,
            min_support_count=15,
            seed=11,
        )
    )
    train, test = synthetic.train_test_split(data, 0.25, seed=2)
    paths = {"train": str(d / "train.txt"), "test": str(d / "test.txt")}
    synthetic.write_maxent_text(train, paths["train"])
    synthetic.write_maxent_text(test, paths["test"])
    return d, paths


def cli(args: list[str], server, via_env: bool = False, timeout: float = 1200):
    """``python -m sparkmaxent ARGS`` as a Spark Connect client of ``server``
    (through ``--remote``, or ``SPARK_REMOTE`` with ``via_env``), ended with
    a clear error as soon as the server exits (``ConnectServer.client``)."""
    env = {**os.environ, "PYTHONPATH": ROOT, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_REMOTE", None)
    if via_env:
        env["SPARK_REMOTE"] = server.url
    else:
        args = [*args, "--remote", server.url]
    proc = server.client([sys.executable, "-m", "sparkmaxent", *args], env, ROOT, timeout)
    assert proc.returncode == 0, f"{args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc


def sets(settings: dict[str, str]) -> list[str]:
    out = []
    for key, value in settings.items():
        out += ["--set", f"{key}={value}"]
    return out


@pytest.fixture(scope="module")
def prepared(spark, server, texts):
    """The training data prepared by a Connect client (through SPARK_REMOTE)
    and by the classic session."""
    d, paths = texts
    remote, classic = str(d / "train-connect"), str(d / "train-classic")
    cli(
        ["prepare", "--input", paths["train"], "--format", "maxent", "--output", remote],
        server,
        via_env=True,
    )
    prepare(spark, [paths["train"]], classic, "maxent", overwrite=True)
    return remote, classic


def classic_model(spark, train_dir: str, method: str, out: str):
    """``method`` trained and saved by the classic session on the RDD backend."""
    cfg = Config()
    # train_config takes the keys' last names (train.grafting.l1 -> l1)
    extra = {k.rsplit(".", 1)[-1]: _value(v) for k, v in METHOD_SETTINGS[method].items()}
    cfg = dataclasses.replace(
        cfg,
        data=dataclasses.replace(cfg.data, in_process_max_events=0, partitions=PARTITIONS),
        train=train_config(method=method, backend="spark-rdd", plots=False, **extra),
    )
    model, report = api.fit(spark, cfg, train_dir, out)
    return model, report


def connect_model(server, train_dir: str, method: str, out: str):
    settings = {
        "data.in_process_max_events": "0",
        "data.partitions": str(PARTITIONS),
        "train.method": method,
        "train.selection.plots": "false",
        **METHOD_SETTINGS[method],
    }
    cli(["train", "--train", train_dir, "--output", out, *sets(settings)], server)
    with open(os.path.join(out, api.TRAIN_REPORT)) as f:
        return MaxentModel.load(os.path.join(out, api.MODEL_DIR)), json.load(f)


def assert_same_model(a: MaxentModel, b: MaxentModel, ra: dict, rb: dict) -> None:
    assert a.weights.ids.tolist() == b.weights.ids.tolist()
    np.testing.assert_allclose(a.weights.values, b.weights.values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.weights.bias, b.weights.bias, rtol=1e-9, atol=1e-12)
    assert ra["objective"] == pytest.approx(rb["objective"], rel=1e-9)
    assert ra["passes"] == rb["passes"]


def test_prepare_under_connect_equals_classic_prepare(prepared):
    remote, classic = (DatasetInfo.load(p) for p in prepared)
    assert remote.n_events == classic.n_events and remote.total_weight == 300
    assert remote.labels == classic.labels
    assert remote.events_fingerprint and remote.events_fingerprint == classic.events_fingerprint
    assert remote.vocabulary_fingerprint == classic.vocabulary_fingerprint


@pytest.mark.slow
@pytest.mark.ci  # kept out of the default suite; CI's slow step runs it
def test_grafting_under_connect_is_classic_grafting(spark, server, prepared, tmp_path):
    """Default-suite check: the grafting model trained, saved and reloaded
    under Connect on the DataFrame backend is the classic RDD backend's."""
    train_dir = prepared[1]
    b, rb = classic_model(spark, train_dir, "grafting", str(tmp_path / "classic"))
    a, ra = connect_model(server, train_dir, "grafting", str(tmp_path / "connect"))
    assert ra["kkt"]["passed"] and ra["passes"] > 3
    assert_same_model(a, b, ra, rb)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["l2", "mle", "ifs", "sgc", "bayes-factor"])
def test_methods_under_connect_equal_classic(spark, server, prepared, tmp_path, method):
    train_dir = prepared[1]
    b, rb = classic_model(spark, train_dir, method, str(tmp_path / "classic"))
    a, ra = connect_model(server, train_dir, method, str(tmp_path / "connect"))
    assert a.weights.nnz > 0
    assert_same_model(a, b, ra, rb)


@pytest.mark.slow
def test_evaluate_under_connect_loads_the_model_and_scores_as_classic(
    spark, server, texts, prepared, tmp_path
):
    d, paths = texts
    out = str(tmp_path / "run")
    model, _ = connect_model(server, prepared[0], "grafting", out)
    model_dir = os.path.join(out, api.MODEL_DIR)
    evaluate = ["evaluate", "--model", model_dir, "--input", paths["test"], "--format", "maxent"]
    report = str(tmp_path / "eval.json")
    proc = cli([*evaluate, "--report", report, "--set", "data.in_process_max_events=0"], server)
    remote = json.loads(proc.stdout[proc.stdout.index("{") :])
    test_dir = str(d / "test-classic")
    vocabulary = os.path.join(model_dir, VOCABULARY_DIR)
    prepare(
        spark,
        [paths["test"]],
        test_dir,
        "maxent",
        vocabulary=vocabulary,
        merge_duplicates=False,  # as evaluate prepares its input
        overwrite=True,
    )
    here = api.evaluate_model(spark, MaxentModel.load(model_dir), test_dir)
    assert remote["events"] == here["events"] == 100
    assert remote["accuracy"] == pytest.approx(here["accuracy"], abs=0)


@pytest.mark.slow
def test_pipeline_and_predict_under_connect_equal_classic(spark, server, texts, tmp_path):
    """``sparkmaxent pipeline`` (prepare, train, evaluate) and ``predict``
    with --remote give the classic session's model, test accuracy and
    predictions."""
    from sparkmaxent.cli import main

    d, paths = texts
    config = tmp_path / "pipeline.toml"
    config.write_text(
        f'[data]\ntrain_inputs = ["{paths["train"]}"]\ntest_inputs = ["{paths["test"]}"]\n'
        f'format = "maxent"\nin_process_max_events = 0\npartitions = {PARTITIONS}\n'
        '[train]\nmethod = "grafting"\n[train.grafting]\nl1 = 2e-3\nn_best = 5\n'
    )
    runs = {kind: str(tmp_path / kind) for kind in ("connect", "classic")}
    cli(["pipeline", "--config", str(config), "--output", runs["connect"]], server)
    assert main(["pipeline", "--config", str(config), "--output", runs["classic"]]) == 0
    reports = {}
    for kind, run in runs.items():
        with open(os.path.join(run, api.PIPELINE_REPORT)) as f:
            reports[kind] = json.load(f)
    a, b = (MaxentModel.load(os.path.join(runs[k], api.MODEL_DIR)) for k in ("connect", "classic"))
    assert_same_model(a, b, reports["connect"]["train"], reports["classic"]["train"])
    assert reports["connect"]["test"]["events"] == 100
    assert reports["connect"]["test"]["accuracy"] == reports["classic"]["test"]["accuracy"]

    predict = ["predict", "--input", paths["test"], "--format", "maxent"]
    model_dir = os.path.join(runs["connect"], api.MODEL_DIR)
    out = {kind: str(tmp_path / f"predictions-{kind}") for kind in runs}
    zero = ["--set", "data.in_process_max_events=0"]
    cli([*predict, "--model", model_dir, "--output", out["connect"], *zero], server)
    assert main([*predict, "--model", model_dir, "--output", out["classic"], *zero]) == 0
    there, here = (spark.read.parquet(out[k]).orderBy("event_id").collect() for k in runs)
    assert len(there) == len(here) == 100
    assert [r.predicted for r in there] == [r.predicted for r in here]
    assert [r.label for r in there] == [r.label for r in here]
    np.testing.assert_allclose(
        [r.probabilities for r in there], [r.probabilities for r in here], rtol=1e-12, atol=0
    )


def _sleeper(seconds: float = 60.0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def test_a_client_of_a_server_that_exited_fails_at_once_with_the_logs(tmp_path):
    """A Connect client whose server is gone retries or waits for an
    answer until its timeout: ``ConnectServer.client`` ends it as soon as
    the server's process has exited, with both sides' log ends."""
    from tests.e2e.connect import ConnectServer

    gone = _sleeper(0)
    gone.wait()
    log = tmp_path / "server.out"
    log.write_text("the server's last words\n")
    server = ConnectServer("sc://127.0.0.1:1", 1, str(tmp_path), str(log), gone.pid)
    cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="exited while its client ran") as raised:
        server.client(cmd, dict(os.environ), str(tmp_path), timeout=600, poll_s=0.2)
    assert time.monotonic() - t0 < 30
    assert "client stderr" in str(raised.value) and "the server's last words" in str(raised.value)


def test_a_client_past_its_timeout_is_ended_with_a_clear_error(tmp_path):
    from tests.e2e.connect import ConnectServer

    alive = _sleeper()
    try:
        server = ConnectServer("sc://127.0.0.1:1", 1, str(tmp_path), "", alive.pid)
        cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
        with pytest.raises(RuntimeError, match="past its timeout of 1 s"):
            server.client(cmd, dict(os.environ), str(tmp_path), timeout=1, poll_s=0.2)
        done = server.client([sys.executable, "-c", "print(7)"], dict(os.environ), ROOT, 60)
        assert done.returncode == 0 and done.stdout.strip() == "7"
    finally:
        alive.kill()
        alive.wait()


def test_a_server_whose_port_another_process_holds_is_refused(tmp_path):
    """A server that could not bind its port (another process took it
    between ``free_port`` and the server's start) is not taken for started:
    its clients would wait on the other process's socket until their
    timeout (seen: the CLI client hung to its 1,200 s timeout)."""
    from tests.e2e.connect import _wait_started

    server = _sleeper()
    pid_dir = tmp_path / "pid"
    pid_dir.mkdir()
    (pid_dir / "spark-x-1.pid").write_text(str(server.pid))
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            t0 = time.monotonic()
            with pytest.raises(RuntimeError, match=f"another process holds port {port}"):
                _wait_started(port, str(pid_dir / "spark-x-*.pid"), str(tmp_path), 60)
            assert time.monotonic() - t0 < 30
    finally:
        server.kill()
        server.wait()


def test_a_server_that_listens_on_its_port_is_started(tmp_path):
    from tests.e2e.connect import _wait_started

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "import socket, time; s = socket.socket(); "
        f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)"
    )
    server = subprocess.Popen([sys.executable, "-c", code])
    pid_dir = tmp_path / "pid"
    pid_dir.mkdir()
    (pid_dir / "spark-x-1.pid").write_text(str(server.pid))
    try:
        assert _wait_started(port, str(pid_dir / "spark-x-*.pid"), str(tmp_path), 60) == server.pid
    finally:
        server.kill()
        server.wait()

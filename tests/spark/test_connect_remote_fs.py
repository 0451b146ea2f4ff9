"""Spark Connect with a file system only the server reaches (issue 39).

The server maps ``viewfs://store/data`` onto a scratch directory (Hadoop's
ViewFileSystem, a mount table in the server's own configuration: no
network). The client has no Hadoop FileSystem and cannot open a
``viewfs://`` URI itself, so every read of one goes through the server,
exactly as ``hdfs://``, ``s3a://`` or ``abfss://`` would
(``sparkmaxent.storage.connect``): training from a prepared dataset there,
evaluating and loading a model saved there (the CLI and pyspark.ml) give
what the same local paths give; a run's ``--output`` there is written
through the server (its lock released, no temporaries left) and gives the
same model; a pyspark.ml model saved there through the server loads back
and is replaced. Only the server's JVM runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sparkmaxent import storage
from sparkmaxent.data import synthetic
from sparkmaxent.model import MaxentModel
from tests.spark.test_connect import ROOT, sets

pytestmark = [pytest.mark.connect, pytest.mark.slow]  # four runs of the CLI, a minute or more

MOUNT = "viewfs://store/data"
SETTINGS = {
    "train.method": "grafting",
    "train.grafting.l1": "2e-3",
    "train.grafting.n_best": "5",
    "data.in_process_max_events": "0",  # the events read by Spark on the server
    "data.partitions": "2",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The scratch directory behind MOUNT, with train and test files."""
    d = tmp_path_factory.mktemp("store")
    data = synthetic.generate(
        synthetic.SyntheticSpec(
            n_events=300,
            n_predicates=30,
            n_labels=3,
            active_per_event=5,
            n_support=5,
            n_copies=0,
            n_conjunctions=0,
            min_support_count=10,
            seed=5,
        )
    )
    train, test = synthetic.train_test_split(data, 0.25, seed=3)
    synthetic.write_maxent_text(train, str(d / "train.txt"))
    synthetic.write_maxent_text(test, str(d / "test.txt"))
    return d


@pytest.fixture(scope="module")
def server(store):
    pytest.importorskip("grpc", reason="the Spark Connect client needs the connect extra")
    from tests.e2e.connect import connect_server

    link = {"spark.hadoop.fs.viewfs.mounttable.store.link./data": f"file://{store}"}
    with connect_server(cores=2, memory="1g", conf=link) as s:
        yield s


def run(args: list[str], server, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python args`` as a client of ``server`` (``ConnectServer.client``: ended with
    a clear error as soon as the server exits or past ``timeout``)."""
    env = {
        **os.environ,
        "PYTHONPATH": ROOT,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_REMOTE": server.url,
    }
    return server.client([sys.executable, *args], env=env, cwd=ROOT, timeout=timeout)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_reading_a_remote_file_system_under_connect(server, store):
    url = server.url
    cli = ["-m", "sparkmaxent"]
    ok(run([*cli, "prepare", "--input", str(store / "train.txt"), "--format", "maxent",
            "--output", str(store / "train")], server))  # fmt: skip
    # train from the dataset on the server's file system; outputs on the client's disk
    ok(run([*cli, "train", "--train", f"{MOUNT}/train", "--output", str(store / "run"),
            *sets(SETTINGS)], server))  # fmt: skip
    run_json = json.loads((store / "run" / "train_report.json").read_text())
    local_train = run([*cli, "train", "--train", str(store / "train"), "--output",
                       str(store / "run-local"), *sets(SETTINGS)], server)  # fmt: skip
    ok(local_train)
    local_json = json.loads((store / "run-local" / "train_report.json").read_text())
    assert run_json["objective"] == pytest.approx(local_json["objective"], rel=1e-9)
    assert run_json["passes"] == local_json["passes"]

    # the model saved there, loaded through the server, scores as the local one
    evaluate = [*cli, "evaluate", "--input", str(store / "test.txt"), "--format", "maxent"]
    there = json.loads(ok(run([*evaluate, "--model", f"{MOUNT}/run/model"], server)))
    here = json.loads(ok(run([*evaluate, "--model", str(store / "run" / "model")], server)))
    assert there["accuracy"] == here["accuracy"] and there["events"] == here["events"] > 0

    # a run's outputs there: written through the server, in place, the same run
    ok(run([*cli, "train", "--train", f"{MOUNT}/train", "--output", f"{MOUNT}/run2",
            *sets(SETTINGS)], server))  # fmt: skip
    there = json.loads(storage.read_bytes(str(store / "run2" / "train_report.json")))  # packed
    assert there["objective"] == pytest.approx(run_json["objective"], rel=1e-9)
    assert not [p for p in os.listdir(store) if ".tmp-" in p]
    claims = [str(p) for p in (store / ".run2.lock").iterdir() if list(p.glob("part-*"))]
    assert [json.loads(storage.read_bytes(p)) for p in claims] == [{"released": True}]
    assert MaxentModel.load(str(store / "run2" / "model")).weights.values.tolist() == (
        MaxentModel.load(str(store / "run" / "model")).weights.values.tolist()
    )

    # pyspark.ml: a model saved there through the server loads back (under Connect
    # and, from the server's disk, in this classic process), and is not replaced
    out = ok(run(["-c", ML_CLIENT, url, f"{MOUNT}/ml"], server))
    assert out.startswith("same predictions"), out
    assert not [p for p in os.listdir(store / "ml") if ".tmp-" in p]
    saved = MaxentModel.load(str(store / "ml" / "model"))
    assert saved.weights.values.tolist() == json.loads(out.split("\n")[1])


#: fit and save a classifier locally, load it through the server, compare
ML_CLIENT = """
import json
import sys
from pyspark.sql import SparkSession
from sparkmaxent.ml import MaxEntClassificationModel, MaxEntClassifier
from tests.ml.data import frame

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
df = frame(spark)
model = MaxEntClassifier(method="grafting", l1=0.01).fit(df)
model.write().save(sys.argv[2])
back = MaxEntClassificationModel.load(sys.argv[2])
weights = model.maxentModel.weights.values.tolist()
assert back.maxentModel.weights.values.tolist() == weights
here = [r.prediction for r in model.transform(df).orderBy("id").collect()]
there = [r.prediction for r in back.transform(df).orderBy("id").collect()]
assert here == there and here
model.write().overwrite().save(sys.argv[2])  # replaced through the server
assert MaxEntClassificationModel.load(sys.argv[2]).maxentModel.weights.values.tolist() == weights
print("same predictions", len(here))
print(json.dumps(weights))
"""

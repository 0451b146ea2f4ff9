"""Spark Connect writing to storage the client cannot see (issue 39).

The Connect server runs in a mount namespace of its own with an empty
tmpfs over the store directory (``connect_server(hide=...)``), and maps
``viewfs://store/data`` onto it: what it writes there stays in its
namespace, so the client's directory stays empty, and the client can read
it back only through the server. A classifier fitted under Connect is
saved there (``model.write().save``), loaded back through the server and
scores as before; a JSON file written there through ``sparkmaxent.storage``
reads back; a write that fails on the server leaves no file. The CLI's
``prepare``, ``train``, ``pipeline`` and ``predict --output`` there write only where
the server sees (locks, checkpoints, reports, plots, models, datasets), the
same model as a local output; a failing run leaves no output there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.e2e.cluster import isolation_unavailable
from tests.e2e.connect import ROOT

pytestmark = [
    pytest.mark.connect,
    pytest.mark.slow,  # a server start and a fit under Connect: a minute or more
    pytest.mark.skipif(bool(isolation_unavailable()), reason=isolation_unavailable() or "ok"),
]

MOUNT = "viewfs://store/data"

CLIENT = """
import sys
from pyspark.sql import SparkSession
from sparkmaxent import storage
from sparkmaxent.ml import MaxEntClassificationModel, MaxEntClassifier
from sparkmaxent.storage.packed import COLUMN
from tests.ml.data import frame

url, mount = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.remote(url).getOrCreate()
df = frame(spark)
model = MaxEntClassifier(method="grafting", l1=0.01).fit(df)
model.write().save(mount + "/ml")
back = MaxEntClassificationModel.load(mount + "/ml")
assert back.maxentModel.weights.values.tolist() == model.maxentModel.weights.values.tolist()
here = [r.prediction for r in model.transform(df).orderBy("id").collect()]
there = [r.prediction for r in back.transform(df).orderBy("id").collect()]
assert here == there and here
storage.write_json(mount + "/notes/run.json", {"rows": len(here)})
assert storage.read_json(mount + "/notes/run.json") == {"rows": len(here)}
assert sorted(storage.listdir(mount)) == ["ml", "notes"], storage.listdir(mount)
failing = spark.range(1).selectExpr(f"cast(raise_error('boom') as binary) as {COLUMN}")
try:
    failing.coalesce(1).write.mode("overwrite").parquet(mount + "/notes/failed.json")
    raise SystemExit("the failing write did not fail")
except Exception as e:
    assert "boom" in str(e), e
assert not storage.exists(mount + "/notes/failed.json")
try:
    with storage.staged(mount + "/half") as half:  # an output built in place there
        storage.write_json(half + "/part.json", {"half": True})
        assert storage.exists(mount + "/half/part.json")
        raise RuntimeError("the build failed")
except RuntimeError:
    pass
assert not storage.exists(mount + "/half") and "half" not in storage.listdir(mount)
try:
    storage.read_bytes(mount + "/notes/failed.json")
    raise SystemExit("read a file whose write failed")
except FileNotFoundError:
    pass
print("same predictions through the server", len(here))
"""


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    """(server, the directory behind MOUNT, a directory both see)."""
    pytest.importorskip("grpc", reason="the Spark Connect client needs the connect extra")
    from tests.e2e.connect import connect_server

    store = tmp_path_factory.mktemp("store")
    shared = tmp_path_factory.mktemp("shared")
    link = {"spark.hadoop.fs.viewfs.mounttable.store.link./data": f"file://{store}"}
    with connect_server(cores=2, memory="1g", conf=link, hide=[str(store)]) as server:
        yield server, store, shared


def client(url: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_REMOTE": url}
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_a_model_saved_where_only_the_server_sees_loads_back_through_it(hidden):
    server, store, _ = hidden
    proc = client(server.url, "-c", CLIENT, server.url, f"{MOUNT}/api")
    assert proc.returncode == 0, f"{proc.stderr[-3000:]}\n{server.logs()}"
    assert proc.stdout.startswith("same predictions through the server"), proc.stdout
    assert os.listdir(store) == []  # all of it in the server's namespace only


#: what the CLI wrote there, read back through the server
CHECK = """
import json, sys
from pyspark.sql import SparkSession
from sparkmaxent import storage
from sparkmaxent.model import MaxentModel

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
m = sys.argv[2]
out = {}
for run in ("run", "pipe"):
    out[run] = MaxentModel.load(f"{m}/{run}/model").weights.values.tolist()
out["report"] = storage.read_json(f"{m}/run/train_report.json")["objective"]
out["test"] = storage.read_json(f"{m}/pipe/report.json")["test"]["events"]
out["listing"] = storage.listdir(m)
out["failed"] = storage.exists(f"{m}/bad")
out["predicted"] = spark.read.parquet(f"{m}/pred").count()
out["claims"] = [storage.read_json(f"{m}/.run.lock/{g}") for g in storage.listdir(f"{m}/.run.lock")]
print(json.dumps(out))
"""


def test_cli_outputs_where_only_the_server_sees(hidden):
    from sparkmaxent.data import synthetic

    server, store, shared = hidden
    spec = synthetic.SyntheticSpec(n_events=240, n_predicates=20, n_labels=3, active_per_event=4,
                                   n_support=4, n_copies=0, n_conjunctions=0,
                                   min_support_count=8, seed=7)  # fmt: skip
    train, test = synthetic.train_test_split(synthetic.generate(spec), 0.25, seed=1)
    synthetic.write_maxent_text(train, str(shared / "train.txt"))
    synthetic.write_maxent_text(test, str(shared / "test.txt"))
    (shared / "bad.txt").write_text("this line is not an event\n")
    sets = ["--set", "train.method=grafting", "--set", "train.grafting.l1=2e-3"]
    cli = ["-m", "sparkmaxent"]
    own = f"{MOUNT}/cli"  # the module's tests share MOUNT: each writes to its own directory

    def ok(*args: str) -> str:
        proc = client(server.url, *cli, *args)
        assert proc.returncode == 0, f"{args[0]} failed:\n{proc.stderr[-3000:]}\n{server.logs()}"
        return proc.stdout

    # prepare there (a small input: prepared in this process, its events written by Spark)
    ok("prepare", "--input", str(shared / "train.txt"), "--format", "maxent",
       "--output", f"{own}/train")  # fmt: skip
    ok("train", "--train", f"{own}/train", "--output", f"{own}/run", *sets)
    ok("train", "--train", f"{own}/train", "--output", str(shared / "run"), *sets)
    config = shared / "pipeline.toml"
    config.write_text(textwrap.dedent(f"""\
        [data]
        train_inputs = ["{shared / 'train.txt'}"]
        test_inputs = ["{shared / 'test.txt'}"]
        format = "maxent"
        [train]
        method = "grafting"
        [train.grafting]
        l1 = 2e-3
        """))  # fmt: skip
    ok("pipeline", "--config", str(config), "--output", f"{own}/pipe")
    ok("predict", "--model", f"{own}/run/model", "--input", str(shared / "test.txt"),
       "--format", "maxent", "--output", f"{own}/pred")  # fmt: skip
    failed = client(server.url, *cli, "prepare", "--input", str(shared / "bad.txt"),
                    "--format", "maxent", "--output", f"{own}/bad")  # fmt: skip
    assert failed.returncode == 2, failed.stderr[-3000:]

    proc = client(server.url, "-c", CHECK, server.url, own)
    assert proc.returncode == 0, f"{proc.stderr[-3000:]}\n{server.logs()}"
    there = json.loads(proc.stdout.strip().splitlines()[-1])
    here = json.loads((shared / "run" / "train_report.json").read_text())
    assert there["report"] == pytest.approx(here["objective"], rel=1e-9)
    assert there["run"] and there["pipe"] and there["test"] > 0
    assert sorted(there["listing"]) == ["pipe", "pred", "run", "train"], there["listing"]
    assert there["predicted"] == there["test"]  # predict there: Spark's Parquet, one row an event
    assert not there["failed"]  # the failed prepare left no output
    assert there["claims"] == [{"released": True}]
    assert os.listdir(store) == []  # the client saw none of it

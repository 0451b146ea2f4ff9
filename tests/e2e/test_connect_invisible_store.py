"""Spark Connect writing to storage the client cannot see (issue 39).

The Connect server runs in a mount namespace of its own with an empty
tmpfs over the store directory (``connect_server(hide=...)``), and maps
``viewfs://store/data`` onto it: what it writes there stays in its
namespace, so the client's directory stays empty, and the client can read
it back only through the server. A classifier fitted under Connect is
saved there (``model.write().save``), loaded back through the server and
scores as before; a JSON file written there through ``sparkmaxent.storage``
reads back; a write that fails on the server leaves no file.
"""

from __future__ import annotations

import os
import subprocess
import sys

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
    storage.read_bytes(mount + "/notes/failed.json")
    raise SystemExit("read a file whose write failed")
except FileNotFoundError:
    pass
print("same predictions through the server", len(here))
"""


def test_a_model_saved_where_only_the_server_sees_loads_back_through_it(tmp_path):
    pytest.importorskip("grpc", reason="the Spark Connect client needs the connect extra")
    from tests.e2e.connect import connect_server

    store = tmp_path / "store"
    store.mkdir()
    link = {"spark.hadoop.fs.viewfs.mounttable.store.link./data": f"file://{store}"}
    with connect_server(cores=2, memory="1g", conf=link, hide=[str(store)]) as server:
        env = {**os.environ, "PYTHONPATH": ROOT, "SPARK_LOCAL_IP": "127.0.0.1"}
        env.pop("SPARK_REMOTE", None)
        proc = subprocess.run(
            [sys.executable, "-c", CLIENT, server.url, MOUNT],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, f"{proc.stderr[-3000:]}\n{server.logs()}"
        assert proc.stdout.startswith("same predictions through the server"), proc.stdout
        assert os.listdir(store) == []  # all of it in the server's namespace only

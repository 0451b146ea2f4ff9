"""scripts/submit.sh end to end, and on a real standalone cluster.

The cluster tests start their own master and worker on 127.0.0.1
(tests/e2e/cluster.py, one cluster per module) and run jobs on it through
scripts/submit.sh, each job with its own driver: they do not use the
session-wide ``spark`` fixture. Both are in the default suite (about 60 s
for the prepare+train test on an idle 2-core machine, plus the cluster
start); ``-m cluster`` selects just them.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import time
import zipfile
from collections.abc import Iterator

import pytest

from tests.e2e.cluster import StandaloneCluster, standalone_cluster

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SUBMIT = os.path.join(ROOT, "scripts", "submit.sh")
LABELS = ["A", "B", "C"]
JOB_TIMEOUT = 300.0  # seconds per spark-submit; the machine may be busy


def submit_env() -> dict[str, str]:
    """This environment, kept on loopback (submit.sh would default to it for
    these masters; the test does not rely on that)."""
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def run_submit(
    args: list[str],
    timeout: float = JOB_TIMEOUT,
    env: dict[str, str] | None = None,
    cwd: str = ROOT,
) -> subprocess.CompletedProcess:
    """Run scripts/submit.sh in its own process group; on timeout kill the
    whole group (spark-submit's JVM and the Python driver under it) and fail.

    stdout and stderr are merged: spark-submit copies the Python driver's
    stderr to its stdout anyway.
    """
    proc = subprocess.Popen(
        [SUBMIT, *args],
        cwd=cwd,
        env=env or submit_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"submit.sh {' '.join(args)} did not finish in {timeout:g} s:\n{out[-4000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def write_maxent_text(path: str, n_events: int = 240, seed: int = 0) -> None:
    """Lines ``label feat feat ...``: two features that mostly tell the label
    and three noise features, so a trained model beats the uniform one."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n_events):
            label = rng.choice(LABELS)
            cue = label if rng.random() < 0.85 else rng.choice(LABELS)
            feats = [f"cue={cue}", f"cue2={cue}{rng.randint(0, 1)}"]
            feats += [f"noise{rng.randint(0, 4)}" for _ in range(3)]
            f.write(f"{label} {' '.join(feats)}\n")


# ---- the wrapper itself (no Spark) --------------------------------------------


def test_help_exits_zero_and_lists_jobs():
    r = run_submit(["--help"], timeout=30)
    assert r.returncode == 0, r.stdout
    assert r.stdout.startswith("usage: scripts/submit.sh")
    for job in ("prepare", "train", "predict", "evaluate", "pipeline", "--py-files-mode"):
        assert job in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["nosuchjob"], "unknown JOB 'nosuchjob'"),
        ([], "expected a JOB"),
        (["--frobnicate", "train"], "unknown option '--frobnicate'"),
        (["--py-files-mode", "egg", "train"], "expected --py-files-mode zip or wheel, got 'egg'"),
        (["--conf", "novalue", "train"], "expected --conf KEY=VALUE, got 'novalue'"),
        (["does/not/exist.py"], "job script 'does/not/exist.py' does not exist"),
    ],
)
def test_usage_errors_exit_two_with_a_message(args, message):
    r = run_submit(args, timeout=30)
    assert r.returncode == 2, r.stdout
    assert message in r.stdout
    assert "spark-submit" not in r.stdout.splitlines()[0]  # failed before launching Spark


def test_job_arguments_pass_through_untouched(tmp_path):
    """A script JOB sees exactly the arguments after it (incl. ones that look
    like submit.sh options), and runs on the venv's Python with the package
    zip on its path and the loopback settings in its Spark conf."""
    script = tmp_path / "echo_args.py"
    out = tmp_path / "seen.json"
    script.write_text(
        "import json, os, sys\n"
        "from pyspark import SparkConf, SparkContext\n"
        "import sparkmaxent\n"
        "SparkContext._ensure_initialized()  # the JVM spark-submit started\n"
        "conf = dict(SparkConf().getAll())\n"
        f"json.dump({{'argv': sys.argv[1:], 'exe': sys.executable,\n"
        "           'pkg': sparkmaxent.__file__, 'conf': conf,\n"
        "           'local_ip': os.environ.get('SPARK_LOCAL_IP')},\n"
        f"          open({str(out)!r}, 'w'))\n"
    )
    job_args = ["--master", "x", "--set", "train.l2=0.5", "--conf", "a=b", "two words"]
    r = run_submit(
        ["--master", "local[1]", "--conf", "spark.app.name=echo", str(script), *job_args]
    )
    assert r.returncode == 0, r.stdout[-4000:]
    seen = json.loads(out.read_text())
    assert seen["argv"] == job_args
    assert seen["local_ip"] == "127.0.0.1"
    assert seen["pkg"].endswith(os.path.join("sparkmaxent.zip", "sparkmaxent", "__init__.py"))
    conf = seen["conf"]
    assert conf["spark.master"] == "local[1]"
    assert conf["spark.app.name"] == "echo"
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert os.path.samefile(conf["spark.pyspark.python"], seen["exe"])


@pytest.mark.slow  # builds a wheel with pip (an isolated build fetches setuptools)
def test_wheel_mode_ships_a_wheel(tmp_path):
    script = tmp_path / "where.py"
    out = tmp_path / "where.txt"
    script.write_text(f"import sparkmaxent\nopen({str(out)!r}, 'w').write(sparkmaxent.__file__)\n")
    env = submit_env()
    env["BUILD_DIR"] = str(tmp_path / "build")
    r = run_submit(["--master", "local[1]", "--py-files-mode", "wheel", str(script)], env=env)
    assert r.returncode == 0, r.stdout[-4000:]
    wheel = tmp_path / "build" / "sparkmaxent-wheel.zip"
    assert out.read_text() == str(wheel / "sparkmaxent" / "__init__.py")
    names = zipfile.ZipFile(wheel).namelist()
    assert "sparkmaxent/cli.py" in names
    assert any(n.endswith(".dist-info/WHEEL") for n in names)


# ---- on a standalone cluster -----------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[StandaloneCluster]:
    with standalone_cluster(cores=2, memory="2g", timeout=120) as c:
        yield c


def _settled_state(cluster: StandaloneCluster, timeout: float = 20.0) -> dict:
    """The master's state once no application is active (an application
    moves to "completed" shortly after its driver stops)."""
    deadline = time.monotonic() + timeout
    while True:
        state = cluster.state()
        if not state.get("activeapps") or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def _executor_log(cluster: StandaloneCluster, app_id: str) -> str:
    """stderr of the executors the worker launched for ``app_id``."""
    app_dir = os.path.join(cluster.work_dir, app_id)
    text = ""
    for d in sorted(os.listdir(app_dir)):
        path = os.path.join(app_dir, d, "stderr")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                text += f.read()
    return text


@pytest.mark.cluster
def test_package_is_shipped_to_executors(cluster, tmp_path):
    """Executors import sparkmaxent from the zip submit.sh ships with
    --py-files (the venv's editable install would also be found, but the
    shipped zip comes first on the executors' path)."""
    script = tmp_path / "where.py"
    out = tmp_path / "where.json"
    script.write_text(
        "import json\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.appName('where').getOrCreate()\n"
        "def where(_):\n"
        "    import os, sys, sparkmaxent\n"
        "    yield (os.path.abspath(sparkmaxent.__file__), sys.executable)\n"
        "seen = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()\n"
        f"json.dump(seen, open({str(out)!r}, 'w'))\n"
        "spark.stop()\n"
    )
    before = {a["id"] for a in _settled_state(cluster).get("completedapps", [])}
    r = run_submit(
        ["--master", cluster.master_url, "--conf", "spark.executor.memory=768m", str(script)]
    )
    assert r.returncode == 0, r.stdout[-4000:]
    ((module_file, executable),) = json.loads(out.read_text())
    assert os.sep.join(["sparkmaxent.zip", "sparkmaxent", "__init__.py"]) in module_file
    # fetched into the executor's directory under the worker's work dir
    assert module_file.startswith(cluster.work_dir + os.sep), module_file
    assert os.path.samefile(executable, os.path.join(ROOT, ".venv", "bin", "python"))
    new = [a for a in _settled_state(cluster)["completedapps"] if a["id"] not in before]
    assert [a["name"] for a in new] == ["where"]


@pytest.mark.slow  # two spark-submit applications on a cluster: over a minute
@pytest.mark.ci
@pytest.mark.cluster
def test_prepare_and_train_on_standalone_cluster(cluster, tmp_path):
    """jobs/prepare.py then jobs/train.py (Spark backend) through submit.sh on
    the cluster: a converged model with a finite objective, from two
    applications the worker ran."""
    started = time.perf_counter()
    text = str(tmp_path / "train.txt")
    write_maxent_text(text)
    prepared = str(tmp_path / "prepared")
    before = {a["id"] for a in _settled_state(cluster).get("completedapps", [])}
    assert os.path.exists(os.path.join(ROOT, "jobs", "prepare.py")), "jobs/prepare.py is missing"

    r = run_submit(
        [
            "--master",
            cluster.master_url,
            "--conf",
            "spark.executor.memory=768m",
            "prepare",
            "--input",
            text,
            "--format",
            "maxent",
            "--output",
            prepared,
            "--set",
            "data.in_process_max_events=0",  # small input too: parsed on the executors
        ]
    )
    assert r.returncode == 0, f"prepare failed:\n{r.stdout[-6000:]}"
    with open(os.path.join(prepared, "dataset.json")) as f:
        info = json.load(f)
    assert sorted(info["labels"]) == LABELS
    assert info["total_weight"] == 240
    prepare_s = time.perf_counter() - started

    run_dir = str(tmp_path / "run")
    r = run_submit(
        [
            "--master",
            cluster.master_url,
            "--conf",
            "spark.executor.memory=768m",
            "train",
            "--train",
            prepared,
            "--output",
            run_dir,
            "--set",
            "train.method=l2",
            "--set",
            "train.l2=0.01",
            "--set",
            "train.backend=spark",
            "--set",
            "data.in_process_max_events=0",  # small data too: the passes run on the executors
        ]
    )
    assert r.returncode == 0, f"train failed:\n{r.stdout[-6000:]}"

    with open(os.path.join(run_dir, "model", "metadata.json")) as f:
        meta = json.load(f)
    assert meta["shape"] == "multiclass"
    assert sorted(meta["labels"]) == LABELS
    assert meta["config"]["train"]["method"] == "l2"
    assert meta["config"]["train"]["l2"] == pytest.approx(0.01)
    assert meta["config"]["train"]["backend"] == "spark"
    summary = meta["summary"]
    assert summary["converged"] is True, summary.get("optimizer_message")
    objective = summary["objective"]
    assert math.isfinite(objective)
    # The cue features tell the label 85-90% of the time: far below the
    # uniform model's log 3 (the objective at w = 0 with balanced labels).
    assert 0.0 < objective < 0.8 * math.log(len(LABELS))
    assert summary["nonzero_weights"] > 0
    assert summary["passes"] > 0
    assert os.path.exists(os.path.join(run_dir, "train_report.json"))

    # Both jobs ran on the cluster: the master completed their two
    # applications, and the worker launched an executor for each, which ran
    # tasks.
    new_apps = [a for a in _settled_state(cluster)["completedapps"] if a["id"] not in before]
    assert sorted(a["name"] for a in new_apps) == sorted(
        ["sparkmaxent-prepare", "sparkmaxent-train"]
    ), (new_apps, cluster.logs())
    for app in new_apps:
        assert app["id"] in cluster.app_dirs(), (app, cluster.app_dirs())
        log = _executor_log(cluster, app["id"])
        assert "Finished task" in log, (app["id"], log[-3000:])
    print(
        f"\ncluster test: prepare {prepare_s:.1f} s, prepare+train "
        f"{time.perf_counter() - started:.1f} s"
    )


@pytest.mark.slow  # venv-pack packs the venv (pyspark left out; 30 s and more)
@pytest.mark.cluster
def test_archive_mode_ships_the_python_environment(cluster, tmp_path):
    """--python-env archive: the executors unpack the venv-pack archive into
    their own directory and run ./env/bin/python from it, importing pyspark
    from the cluster's Spark (the archive leaves it out)."""
    pytest.importorskip("venv_pack", reason="venv-pack is not installed (the 'cluster' extra)")
    script = tmp_path / "where.py"
    out = tmp_path / "where.json"
    script.write_text(
        "import json, sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.appName('archive').getOrCreate()\n"
        "def where(_):\n"
        "    import os, sys, numpy, pyspark\n"
        "    yield (sys.executable, sys.prefix, os.path.abspath(numpy.__file__),\n"
        "           os.path.abspath(pyspark.__file__))\n"
        "seen = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()\n"
        f"json.dump({{'driver': sys.executable, 'executors': seen}}, open({str(out)!r}, 'w'))\n"
        "spark.stop()\n"
    )
    env = submit_env()
    env["BUILD_DIR"] = str(tmp_path / "build")
    r = run_submit(
        [
            "--master",
            cluster.master_url,
            "--conf",
            "spark.executor.memory=768m",
            "--python-env",
            "archive",
            str(script),
        ],
        timeout=2 * JOB_TIMEOUT,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-4000:]
    assert (tmp_path / "build" / "env.tar.gz").is_file()
    seen = json.loads(out.read_text())
    assert os.path.samefile(seen["driver"], os.path.join(ROOT, ".venv", "bin", "python"))
    ((executable, prefix, numpy_file, pyspark_file),) = seen["executors"]
    # ./env/bin/python in the executor's directory under the worker's work dir
    assert os.path.normpath(executable).endswith(os.path.join("env", "bin", "python")), executable
    assert os.path.realpath(prefix).startswith(os.path.realpath(cluster.work_dir) + os.sep), prefix
    assert os.path.realpath(numpy_file).startswith(os.path.realpath(prefix) + os.sep), numpy_file
    # pyspark is the cluster's (its python/lib/pyspark.zip), not the archive's
    assert not os.path.realpath(pyspark_file).startswith(os.path.realpath(prefix)), pyspark_file

"""Creating the Spark session the jobs and tests use.

Settings come in three layers, highest first:

1. what the user gave Spark itself: ``spark-submit --master/--conf``,
   ``spark-defaults.conf`` (under spark-submit: the JVM's ``spark.*`` system
   properties, read with ``SparkConf(loadDefaults=True)``; in a plain Python
   process: the ``spark-defaults.conf`` file the gateway's spark-submit will
   load);
2. the ``[spark]`` section of the TOML config (``master``, ``conf``);
3. this module's defaults: ``DEFAULT_CONF``, and ``LOOPBACK_CONF`` and
   ``LOCAL_JVM_CONF`` when the master is local.

The project's settings are defaults only: a key of layer 1 is never
overridden. See :func:`plan_session`.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field

from sparkmaxent.backends.chunked import CACHE_CHUNK_BYTES

log = logging.getLogger(__name__)

# Spark binds to the machine's external interface unless told otherwise; local
# runs stay on loopback, so nothing listens on the network. Never applied to a
# remote master: executors elsewhere must reach the driver.
LOOPBACK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
# A local master's one JVM is the driver and the executor, on a machine it
# shares with its Python workers. The stream of short-lived byte arrays
# that goes through it (the events on their way to the workers while the
# blocks are cached, each pass's cached chunks on their way back to them)
# makes G1 grow its heap to several times what it keeps alive, even with
# its periodic and concurrent cycles; the serial collector grows the heap
# only when its old generation fills and gives back what exceeds 30% free
# after each full collection (MaxHeapFreeRatio; MinHeapFreeRatio must not
# exceed it). A local JVM is one process on one machine, its heap a few
# GiB, where the serial collector's pauses are short. Documented in
# docs/cli.md ("Spark settings").
LOCAL_JVM_CONF = {
    "spark.driver.extraJavaOptions": (
        "-XX:+UseSerialGC -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30"
    ),
}
# The block manager stores a partition cached at a serialized level in
# chunks of spark.storage.unrollMemoryThreshold bytes. Spark's 1 MiB is a
# humongous object for G1 in heaps under 8 GiB (regions of 2 MiB or less),
# taking whole regions of its own: the block cache took about twice its
# size on the heap. CACHE_CHUNK_BYTES is an ordinary object at every
# region size.
DEFAULT_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.storage.unrollMemoryThreshold": str(CACHE_CHUNK_BYTES),
}
MASTER_KEY = "spark.master"
NAME_KEY = "spark.app.name"


@dataclass(frozen=True)
class SessionPlan:
    """What :func:`spark_session` gives the builder.

    ``settings``: every key at its winning value, the master included (as
    ``spark.master``) when known; ``builder_conf``: the keys whose value
    comes from the project (TOML or defaults), the ones the builder must set
    (the user's layer is already in Spark's own conf); ``master``: the
    master the builder must set, or None; ``loopback``: whether the driver
    is bound to 127.0.0.1; ``app_name``: the application's name.
    """

    settings: dict[str, str]
    app_name: str = "sparkmaxent"
    builder_conf: dict[str, str] = field(default_factory=dict)
    master: str | None = None
    loopback: bool = False


def is_local_master(master: str | None) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``local-cluster[...]``."""
    if not master:
        return False
    m = master.strip()
    return m == "local" or m.startswith(("local[", "local-cluster["))


def plan_session(
    master: str | None,
    conf: dict | None,
    provided: dict[str, str] | None = None,
    under_submit: bool = False,
    app_name: str = "sparkmaxent",
    script: str = "",
) -> SessionPlan:
    """Merge the three layers (module docstring) and decide the binding.

    ``master``/``conf``: the TOML's (layer 2); ``provided``: what spark-submit
    or spark-defaults.conf set (layer 1, ``spark.master`` included);
    ``under_submit``: running as a spark-submit driver.

    The master is layer 1's ``spark.master``, else ``master``; with neither,
    pyspark's default (``local[*]``) outside spark-submit. The driver binds
    to loopback only for a local master (or none, outside spark-submit),
    never for ``spark://``, ``yarn``, ``k8s://``...; a ``spark.driver.host``
    or ``bindAddress`` of layer 1 or 2 still wins.

    The name is ``app_name`` unless layer 1 has a ``spark.app.name`` other
    than ``script``'s file name (spark-submit's default name, when no
    ``--name`` was given).
    """
    provided = {str(k): str(v) for k, v in (provided or {}).items()}
    project = {str(k): str(v) for k, v in (conf or {}).items()}
    effective = provided.get(MASTER_KEY) or master or None
    if effective is None:
        loopback = not under_submit
    else:
        loopback = is_local_master(effective)
    defaults = dict(DEFAULT_CONF)
    if loopback:
        defaults.update(LOOPBACK_CONF)
        defaults.update(LOCAL_JVM_CONF)
    builder_conf = {**defaults, **project}
    own = (MASTER_KEY, NAME_KEY)  # set with builder.master() and .appName()
    builder_conf = {k: v for k, v in builder_conf.items() if k not in provided and k not in own}
    settings = {**builder_conf, **provided}
    builder_master = None
    if MASTER_KEY not in provided and master:
        builder_master = master
        settings[MASTER_KEY] = master
    app_name = project.get(NAME_KEY) or app_name
    given_name = provided.get(NAME_KEY, "")
    if given_name and given_name != os.path.basename(script):
        app_name = given_name
    settings[NAME_KEY] = app_name
    return SessionPlan(settings, app_name, builder_conf, builder_master, loopback)


def under_spark_submit() -> bool:
    """Is this Python the driver spark-submit started (PythonRunner hands it
    the JVM's gateway; a plain Python process launches its own)?"""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def read_properties(path: str) -> dict[str, str]:
    """A ``spark-defaults.conf``: ``key value`` or ``key=value`` lines, ``#``
    and ``!`` comments (the simple subset of Java properties Spark's own
    template uses)."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            space = next((i for i, c in enumerate(line) if c.isspace()), -1)
            if space >= 0 and (cut < 0 or space < cut):
                key, value = line[:space], line[space:].strip()
                if value[:1] in ("=", ":"):
                    value = value[1:].strip()
            elif cut >= 0:
                key, value = line[:cut].strip(), line[cut + 1 :].strip()
            else:
                key, value = line, ""
            out[key] = value
    return out


def spark_defaults_file() -> str | None:
    """The spark-defaults.conf spark-submit would load: in $SPARK_CONF_DIR,
    else $SPARK_HOME/conf, else the pyspark installation's conf/."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        home = os.environ.get("SPARK_HOME")
        if not home:
            try:
                from pyspark.find_spark_home import _find_spark_home

                home = _find_spark_home()
            except (ImportError, SystemExit):  # it exits when it finds none
                return None
        conf_dir = os.path.join(home, "conf")
    path = os.path.join(conf_dir, "spark-defaults.conf")
    return path if os.path.isfile(path) else None


def provided_conf(under_submit: bool) -> dict[str, str]:
    """Layer 1: the ``spark.*`` settings spark-submit and spark-defaults.conf
    give. Under spark-submit the JVM already holds them as system
    properties; otherwise the gateway is not started yet (its launch must get
    ``spark.driver.memory`` and the like), so the file is read here."""
    if under_submit:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # connects to spark-submit's JVM
        return {k: v for k, v in SparkConf(loadDefaults=True).getAll() if k.startswith("spark.")}
    path = spark_defaults_file()
    if path is None:
        return {}
    return {k: v for k, v in read_properties(path).items() if k.startswith("spark.")}


REMOTE_ENV = "SPARK_REMOTE"


def remote_url(remote: str | None = None) -> str | None:
    """The Spark Connect URL to use: ``remote`` (``spark.remote`` or
    ``--remote``), else the ``SPARK_REMOTE`` environment variable, else None
    (a classic session)."""
    return remote or os.environ.get(REMOTE_ENV) or None


def connect_session(remote: str, app_name: str = "sparkmaxent", conf: dict | None = None):
    """A Spark Connect client session to ``remote`` (``sc://host:port``).

    The server owns the master and its static settings; the client sets the
    runtime SQL defaults of ``DEFAULT_CONF`` and the TOML's ``conf`` (a static
    key there draws a warning from pyspark and keeps the server's value)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(remote).appName(app_name)
    settings = {k: v for k, v in DEFAULT_CONF.items() if k.startswith("spark.sql.")}
    settings.update({str(k): str(v) for k, v in (conf or {}).items()})
    for key, value in settings.items():
        builder = builder.config(key, value)
    log.info("Spark Connect session to %s", remote)
    return builder.getOrCreate()


def spark_session(
    master: str | None = "local[2]",
    app_name: str = "sparkmaxent",
    conf: dict | None = None,
    remote: str | None = None,
):
    """Get or create a SparkSession.

    ``master``, ``app_name`` and ``conf`` are defaults: what spark-submit
    or spark-defaults.conf set wins (:func:`plan_session`). The Spark UI is on
    unless a layer sets ``spark.ui.enabled=false``. Executors must run the
    driver's Python (else "No module named pyarrow"), so PYSPARK_PYTHON
    defaults to this interpreter. With a local master the driver binds to
    127.0.0.1, and (outside spark-submit, before the JVM starts)
    SPARK_LOCAL_IP defaults to 127.0.0.1, which keeps the UI and the block
    manager on loopback too.

    With ``remote`` (or ``SPARK_REMOTE`` in the environment), a Spark
    Connect client session to that server instead (:func:`connect_session`);
    ``master`` is then the server's business and ignored.
    """
    from pyspark.sql import SparkSession

    url = remote_url(remote)
    if url:
        return connect_session(url, app_name, conf)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submit = under_spark_submit()
    script = sys.argv[0] if sys.argv else ""
    plan = plan_session(master, conf, provided_conf(submit), submit, app_name, script)
    if master and plan.master is None and plan.settings.get(MASTER_KEY) != master:
        log.info(
            "Spark master %s (from spark-submit/spark-defaults), not %s",
            plan.settings.get(MASTER_KEY),
            master,
        )
    if plan.loopback and not submit:
        from pyspark import SparkContext

        if SparkContext._jvm is None:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(plan.app_name)
    if plan.master:
        builder = builder.master(plan.master)
    for key, value in plan.builder_conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()

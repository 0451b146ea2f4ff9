"""A throwaway Spark standalone cluster (one master, one worker) on 127.0.0.1.

For end-to-end tests and benchmarks that need a real ``spark://`` master
rather than ``local[N]``::

    from tests.e2e.cluster import standalone_cluster

    with standalone_cluster(cores=2, memory="2g") as cluster:
        subprocess.run(["scripts/submit.sh", "--master", cluster.master_url, "train", ...])
        assert cluster.app_dirs()          # the worker ran the application

Or by hand, from the repository root (Ctrl-C stops it)::

    .venv/bin/python -m tests.e2e.cluster --cores 2 --memory 4g

Both daemons are started with pyspark's ``bin/spark-class`` in their own
process group, bound to 127.0.0.1 only (``--host 127.0.0.1`` and
``SPARK_LOCAL_IP=127.0.0.1``, which also puts the web UIs on loopback; see
DESIGN.md section 6), with their logs, work and local directories in one
temporary directory. On exit both process groups get SIGTERM, then SIGKILL
after a grace period, and the temporary directory is removed.

``isolated_cluster`` is the same cluster with the worker (and so its
executors) in its own mount namespace, as on a cluster whose nodes do not
share the driver's disk: ``unshare --mount --propagation private`` with a
private tmpfs over ``/tmp``, over the driver's working directory and over any
other path given, so that the only directory the driver and the executors
both see is the "store" passed to jobs as ``file:///...`` (issue 17)::

    with isolated_cluster(hide=[ROOT]) as c:
        subprocess.run([..., "--output", c.store_uri + "/run"], cwd=c.driver_dir)

Its files (store, driver directory, daemons' work and logs) live under
``/var/tmp``, which the worker sees: ``/tmp`` is hidden from it. Needs root
(``unshare --mount``); ``isolation_unavailable()`` says why not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

LOOPBACK = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

#: the checkout these tests run from
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def spark_home() -> str:
    """``$SPARK_HOME``, else the directory of the installed pyspark package
    (which carries ``bin/spark-class`` and the jars)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return home
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def spark_class() -> str:
    """Path of ``bin/spark-class``; FileNotFoundError with the place looked in."""
    path = os.path.join(spark_home(), "bin", "spark-class")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"expected Spark's launcher at {path} (set SPARK_HOME or "
            "install pyspark), it does not exist"
        )
    return path


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"<cannot read {path}: {e}>"


@dataclass
class StandaloneCluster:
    """A running master and worker.

    Attributes
    ----------
    master_url : str
        ``spark://127.0.0.1:PORT``, for ``--master``.
    webui_url : str
        The master's web UI, ``http://127.0.0.1:PORT`` (``/json/`` is its state).
    base_dir : str
        Temporary directory holding everything below; removed on exit.
    master_log, worker_log : str
        stdout and stderr of each daemon.
    work_dir : str
        The worker's work directory: one ``app-*`` directory per application
        whose executors it launched.
    """

    master_url: str
    webui_url: str
    base_dir: str
    master_log: str
    worker_log: str
    work_dir: str
    worker_pid: int = 0
    hidden: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.master_url

    def state(self, timeout: float = 5.0) -> dict:
        """The master's state from its web UI JSON (workers, active and
        completed applications)."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=timeout) as r:
            return json.load(r)

    def app_dirs(self) -> list[str]:
        """Names of the application directories in the worker's work dir."""
        if not os.path.isdir(self.work_dir):
            return []
        return sorted(d for d in os.listdir(self.work_dir) if d.startswith("app-"))

    def applications(self) -> list[dict]:
        """Active and completed applications the master knows of."""
        s = self.state()
        return list(s.get("activeapps", [])) + list(s.get("completedapps", []))

    def logs(self, lines: int = 30) -> str:
        """The last lines of both daemons' logs, for error messages."""
        return (
            f"--- master log ({self.master_log}) ---\n{_tail(self.master_log, lines)}"
            f"--- worker log ({self.worker_log}) ---\n{_tail(self.worker_log, lines)}"
        )


#: Where kept paths wait (a private tmpfs in the namespace) while the
#: hiding mounts go on.
_STAGE = "/mnt"


def _mount_script(hide: list[str], keep: list[str]) -> str:
    """Shell of ``isolated``: each ``keep`` path bind-mounted aside, a tmpfs
    over each ``hide`` path, the kept paths bound back in place, then exec."""
    q = shlex.quote
    steps = [f"mount -t tmpfs sparkmaxent-stage {_STAGE} || exit 96"] if keep else []
    for i, k in enumerate(keep):
        steps.append(f"mkdir -p {_STAGE}/{i} && mount --bind {q(k)} {_STAGE}/{i} || exit 96")
    for p in hide:
        steps.append(f"mount -t tmpfs -o mode=1777,size=256m sparkmaxent-hidden {q(p)} || exit 97")
    for i, k in enumerate(keep):
        steps.append(f"mkdir -p {q(k)} && mount --bind {_STAGE}/{i} {q(k)} || exit 96")
    return "; ".join([*steps, 'exec "$@"'])


def isolation_unavailable() -> str:
    """Why ``hide`` cannot work here ('' when it can): it needs ``unshare``
    and root (to mount in a new mount namespace)."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    if os.geteuid() != 0:
        return "unshare --mount needs root"
    return ""


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def kept_paths(hide: Sequence[str], keep: Sequence[str] = ()) -> list[str]:
    """What ``isolated`` binds back inside the hidden paths: the Python
    environment (with Spark's launch scripts; a virtualenv inside the
    checkout, as in CI) and each of ``keep``, where they lie under a hidden
    path; a path inside another kept one comes with it."""
    paths = [os.path.abspath(p) for p in hide]
    wanted = [os.path.realpath(sys.prefix), *(os.path.realpath(k) for k in keep)]
    wanted = [k for k in wanted if _under(k, paths)]
    return [k for k in wanted if not any(k != o and _under(k, [o]) for o in wanted)]


def isolated(cmd: list[str], hide: Sequence[str], keep: Sequence[str] = ()) -> list[str]:
    """``cmd`` run in a new private mount namespace with an empty tmpfs over
    each path of ``hide`` (existing directories): what it writes there
    stays in the namespace, and it sees nothing that was there but the
    ``kept_paths`` (the Python environment and ``keep``)."""
    if not hide:
        return cmd
    paths = [os.path.abspath(p) for p in hide]
    for p in paths:
        if not os.path.isdir(p):
            raise FileNotFoundError(f"cannot hide {p}: not a directory")
    # a path under another hidden one (a checkout under /tmp) is hidden with it:
    # its own mount point is gone once the tmpfs covers the parent
    paths = [p for p in paths if not any(p.startswith(q + os.sep) for q in paths)]
    script = _mount_script(paths, kept_paths(paths, keep))
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *cmd]


def mount_namespace(pid: int) -> str:
    """The mount namespace of process ``pid`` (``mnt:[inode]``), '' if gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return ""


def namespace_pids(namespace: str) -> list[int]:
    """Processes still in mount namespace ``namespace`` (the namespace and
    its mounts exist until the last one exits)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and mount_namespace(int(entry)) == namespace:
            pids.append(int(entry))
    return pids


def run_isolated(
    commands: Sequence[Sequence[str]],
    hide: Sequence[str],
    cwd: str,
    listing: str,
    env: dict[str, str] | None = None,
    timeout: float = 600.0,
) -> tuple[int, str, list[str]]:
    """Run ``commands`` one after another (stopping at the first failure)
    from ``cwd`` in a new mount namespace with an empty tmpfs over each of
    ``hide``; before the namespace ends, list every path left under
    ``hide`` into the file ``listing`` (which must be outside them).

    The checkout stays visible (``kept_paths``) where it lies under a hidden
    path (a clone under /tmp): the commands run its scripts; it and the
    directories above it are not counted as left.

    Returns (exit code, merged stdout and stderr, the paths left). On
    timeout the whole process group is killed (ending the namespace) and
    TimeoutError raised with the output's end."""
    kept = kept_paths(hide, [CHECKOUT])
    roots = " ".join(shlex.quote(os.path.abspath(h)) for h in hide)
    prune = "".join(f" -path {shlex.quote(k)} -prune -o" for k in kept)
    script = "\n".join(
        [
            f"cd {shlex.quote(cwd)} || exit 96",
            f"trap 'find {roots} -mindepth 1{prune} -print > {shlex.quote(listing)}' EXIT",
            *(f"{shlex.join(c)} || exit $?" for c in commands),
        ]
    )
    proc = subprocess.Popen(
        isolated(["bash", "-c", script], hide, [CHECKOUT]),
        env=env,
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
        raise TimeoutError(
            f"isolated run did not finish in {timeout:g} s:\n{out[-4000:]}"
        ) from None
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        with open(listing) as f:
            left = [line.rstrip("\n") for line in f if line.strip()]
        left = [p for p in left if not any(_under(k, [p]) for k in kept)]  # a kept path's parents
    except OSError as e:
        raise RuntimeError(f"no listing of the hidden mounts ({e}):\n{out[-4000:]}") from e
    return proc.returncode, out, left


def cluster_env(base_dir: str) -> dict[str, str]:
    """Environment of the daemons: loopback, temporary dirs, this Python for
    executors (DESIGN.md section 6: executors must run the driver's Python)."""
    env = dict(os.environ)
    env.update(
        {
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_LOCAL_DIRS": os.path.join(base_dir, "local"),
            "SPARK_WORKER_DIR": os.path.join(base_dir, "work"),
            "SPARK_LOG_DIR": os.path.join(base_dir, "logs"),
            "SPARK_PID_DIR": os.path.join(base_dir, "pids"),
            "SPARK_NO_DAEMONIZE": "1",
            "SPARK_HOME": spark_home(),
        }
    )
    # The master's REST submission server would take the fixed port 6066
    # (clashing with any other cluster here); spark-submit does not need it.
    env["SPARK_MASTER_OPTS"] = (
        env.get("SPARK_MASTER_OPTS", "") + " -Dspark.master.rest.enabled=false"
    ).strip()
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    for key in ("SPARK_LOCAL_DIRS", "SPARK_WORKER_DIR", "SPARK_LOG_DIR", "SPARK_PID_DIR"):
        os.makedirs(env[key], exist_ok=True)
    return env


def _start(cmd: list[str], log_path: str, env: dict[str, str]) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def stop_process_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM the process group led by ``proc``, then SIGKILL after ``grace`` s."""
    if proc.poll() is not None:
        # The leader is gone; its group may still hold children (killpg fails if not).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def _alive_workers(webui_url: str) -> int:
    try:
        with urllib.request.urlopen(f"{webui_url}/json/", timeout=2) as r:
            state = json.load(r)
    except (urllib.error.URLError, OSError, ValueError):
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@contextlib.contextmanager
def standalone_cluster(
    cores: int = 1,
    memory: str = "1g",
    timeout: float = 60.0,
    grace: float = 5.0,
    hide: Sequence[str] = (),
    base_parent: str | None = None,
) -> Iterator[StandaloneCluster]:
    """Start a master and one worker on 127.0.0.1; yield when the worker is
    registered; stop both and remove their files on exit.

    Parameters
    ----------
    cores : int
        Cores the worker offers (``--cores``).
    memory : str
        Memory the worker offers (``--memory``, e.g. "1g"); executors ask
        for ``spark.executor.memory`` (1g by default) out of it.
    timeout : float
        Seconds to wait for the worker to register with the master.
    grace : float
        Seconds between SIGTERM and SIGKILL when stopping.
    hide : sequence of str
        Directories the worker and its executors must not see: the worker
        runs in its own mount namespace with an empty tmpfs over each
        (``isolated``); on exit every process left in that namespace is
        killed, which unmounts them.
    base_parent : str or None
        Where the cluster's temporary directory goes (default: the system's
        temporary directory, which must not be hidden then).

    Yields
    ------
    StandaloneCluster
        ``master_url`` is the ``spark://127.0.0.1:PORT`` URL.

    Raises
    ------
    TimeoutError
        The worker did not register in time (the message has both logs).
    RuntimeError
        A daemon exited during start-up (the message has both logs).
    """
    if cores < 1:
        raise ValueError(f"expected cores >= 1, got {cores}")
    launcher = spark_class()
    base = tempfile.mkdtemp(prefix="sparkmaxent-cluster-", dir=base_parent)
    procs: list[subprocess.Popen] = []
    namespace = ""
    try:
        env = cluster_env(base)
        port, ui_port, worker_ui_port = free_port(), free_port(), free_port()
        cluster = StandaloneCluster(
            master_url=f"spark://{LOOPBACK}:{port}",
            webui_url=f"http://{LOOPBACK}:{ui_port}",
            base_dir=base,
            master_log=os.path.join(env["SPARK_LOG_DIR"], "master.out"),
            worker_log=os.path.join(env["SPARK_LOG_DIR"], "worker.out"),
            work_dir=env["SPARK_WORKER_DIR"],
            hidden=[os.path.abspath(p) for p in hide],
        )
        procs.append(
            _start(
                [
                    launcher,
                    MASTER_CLASS,
                    "--host",
                    LOOPBACK,
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui_port),
                ],
                cluster.master_log,
                env,
            )
        )
        worker_cmd = _worker_command(cluster, cores, memory, worker_ui_port)
        procs.append(_start(isolated(worker_cmd, hide), cluster.worker_log, env))
        cluster.worker_pid = procs[-1].pid
        deadline = time.monotonic() + timeout
        while _alive_workers(cluster.webui_url) < 1:
            for proc, name in zip(procs, ("master", "worker")):
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"the Spark {name} exited with code {proc.returncode} "
                        f"during start-up\n{cluster.logs()}"
                    )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no worker registered with {cluster.master_url} within "
                    f"{timeout:g} s\n{cluster.logs()}"
                )
            time.sleep(0.5)
        if hide:
            # unshare execs the worker: its process is in the new namespace
            namespace = mount_namespace(cluster.worker_pid)
            if namespace in ("", mount_namespace(os.getpid())):
                raise RuntimeError(
                    f"the worker is not in its own mount namespace ({namespace!r})\n"
                    f"{cluster.logs()}"
                )
        yield cluster
    finally:
        for proc in reversed(procs):  # worker first, so the master sees it leave
            stop_process_group(proc, grace)
        if namespace:  # anything the worker started outside its process group
            for pid in namespace_pids(namespace):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class IsolatedCluster:
    """A standalone cluster whose worker sees neither the driver's ``/tmp``
    nor ``driver_dir`` (``isolated_cluster``).

    Attributes
    ----------
    cluster : StandaloneCluster
        ``cluster.hidden`` lists what the worker cannot see.
    store : str
        The one directory both driver and executors see (a local path).
    store_uri : str
        ``file://`` + ``store``, for jobs' input and output arguments.
    driver_dir : str
        The working directory for drivers (empty, hidden from the worker).
    """

    cluster: StandaloneCluster
    store: str
    store_uri: str
    driver_dir: str

    @property
    def master_url(self) -> str:
        return self.cluster.master_url


@contextlib.contextmanager
def isolated_cluster(
    cores: int = 1,
    memory: str = "1g",
    timeout: float = 60.0,
    grace: float = 5.0,
    hide: Sequence[str] = (),
    parent: str = "/var/tmp",
) -> Iterator[IsolatedCluster]:
    """``standalone_cluster`` with the worker in its own mount namespace, a
    private tmpfs over ``/tmp``, the driver directory and ``hide``; yields
    an ``IsolatedCluster``; on exit stops the daemons, ends the namespace
    (and so its mounts) and removes the store and the driver directory.

    Everything lives in a new directory under ``parent`` (default
    ``/var/tmp``: outside ``/tmp``, so the worker sees the store)."""
    why = isolation_unavailable()
    if why:
        raise RuntimeError(f"cannot isolate the worker: {why}")
    top = tempfile.mkdtemp(prefix="sparkmaxent-isolated-", dir=parent)
    try:
        store, driver = os.path.join(top, "store"), os.path.join(top, "driver")
        os.makedirs(store)
        os.makedirs(driver)
        hidden = ["/tmp", driver, *hide]
        with standalone_cluster(cores, memory, timeout, grace, hidden, top) as cluster:
            yield IsolatedCluster(cluster, store, "file://" + store, driver)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _worker_command(cluster: StandaloneCluster, cores: int, memory: str, ui_port: int) -> list[str]:
    """The command line of a worker of ``cluster`` on 127.0.0.1."""
    return [
        spark_class(),
        WORKER_CLASS,
        cluster.master_url,
        "--host",
        LOOPBACK,
        "--cores",
        str(cores),
        "--memory",
        memory,
        "--webui-port",
        str(ui_port),
        "--work-dir",
        cluster.work_dir,
    ]


@contextlib.contextmanager
def extra_worker(
    cluster: StandaloneCluster,
    cores: int = 1,
    memory: str = "1g",
    timeout: float = 60.0,
    grace: float = 5.0,
) -> Iterator[subprocess.Popen]:
    """Start one more worker for ``cluster`` in its own process group; yield
    its process once the master counts it alive; stop it on exit. The caller
    may kill it earlier (``os.killpg(proc.pid, signal.SIGKILL)``: a worker
    dying with its executors)."""
    env = cluster_env(cluster.base_dir)
    ui_port = free_port()
    log_path = os.path.join(env["SPARK_LOG_DIR"], f"worker-{ui_port}.out")
    proc = _start(_worker_command(cluster, cores, memory, ui_port), log_path, env)

    def alive() -> bool:
        with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
            return any(
                w.get("state") == "ALIVE" and w.get("webuiaddress", "").endswith(f":{ui_port}")
                for w in cluster.state(timeout=2).get("workers", [])
            )
        return False

    try:
        deadline = time.monotonic() + timeout
        while not alive():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the extra Spark worker exited with code {proc.returncode}\n{_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the extra worker did not register within {timeout:g} s\n{_tail(log_path)}"
                )
            time.sleep(0.5)
        yield proc
    finally:
        stop_process_group(proc, grace)


def main(argv: list[str] | None = None) -> int:
    """Run a cluster in the foreground until Ctrl-C (for benchmarks by hand)."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.e2e.cluster",
        description="Start a Spark standalone master and worker on 127.0.0.1, print the "
        "master URL, and stop both on Ctrl-C or SIGTERM.",
    )
    parser.add_argument("--cores", type=int, default=1, help="worker cores (default 1)")
    parser.add_argument("--memory", default="1g", help="worker memory (default 1g)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the worker to register (default 60)",
    )
    args = parser.parse_args(argv)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        with standalone_cluster(args.cores, args.memory, args.timeout) as cluster:
            print(
                f"master: {cluster.master_url}\nweb UI: {cluster.webui_url}\n"
                f"logs:   {os.path.dirname(cluster.master_log)}",
                flush=True,
            )
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    except (TimeoutError, RuntimeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

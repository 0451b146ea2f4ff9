"""A throwaway Spark Connect server on 127.0.0.1, for tests and benchmarks.

Started with pyspark's own ``sbin/start-connect-server.sh`` (it ships in the
pyspark wheel, with ``jars/spark-connect_*.jar``) over a ``local[N]``
master, the gRPC service bound to 127.0.0.1 on a free port, and its logs,
pid file and local directories in one temporary directory::

    from tests.e2e.connect import connect_server

    with connect_server() as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()

The server's Python workers run this interpreter with the repository on
``PYTHONPATH`` (so they import this checkout's ``sparkmaxent``). On exit:
``sbin/stop-connect-server.sh``, then SIGKILL to the server if it is still
there, and the temporary directory is removed. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tests.e2e.cluster import LOOPBACK, _tail, free_port, isolated, spark_home

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class ConnectServer:
    """A running Spark Connect server: ``url`` (``sc://127.0.0.1:PORT``)
    for ``SparkSession.builder.remote``, its ``log`` file and ``pid``."""

    url: str
    port: int
    base_dir: str
    log: str
    pid: int

    def logs(self, lines: int = 40) -> str:
        return f"--- Spark Connect server log ({self.log}) ---\n{_tail(self.log, lines)}"

    def client(
        self, cmd: list[str], env: dict[str, str], cwd: str, timeout: float, poll_s: float = 1.0
    ) -> subprocess.CompletedProcess:
        """``cmd``, a client of this server, run to its end with its output
        captured; it is killed and RuntimeError raised (with the client's
        and the server's log ends) as soon as the server exits (a client
        would otherwise retry or wait for an answer until ``timeout``), or
        once ``timeout`` seconds pass. Checked every ``poll_s`` seconds."""
        deadline = time.monotonic() + timeout
        with subprocess.Popen(
            cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as proc:
            while True:
                try:
                    out, err = proc.communicate(timeout=poll_s)
                    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
                except subprocess.TimeoutExpired:
                    pass
                if not _alive(self.pid):
                    why = f"the Spark Connect server (pid {self.pid}) exited while its client ran"
                elif time.monotonic() > deadline:
                    why = f"the client ran past its timeout of {timeout:g} s"
                else:
                    continue
                proc.kill()
                out, err = proc.communicate()
                raise RuntimeError(
                    f"{why}: {cmd}\n--- client stderr ---\n{err[-3000:]}\n{self.logs()}"
                )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((LOOPBACK, port)) == 0


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on TCP ``port``
    (Linux's /proc: the listening sockets' inodes among the process's open
    files); True where /proc cannot tell."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = [line.split() for line in f.readlines()[1:]]
        except OSError:
            continue
        for row in rows:  # local address HEX:PORT, state 0A = LISTEN, inode
            if row[3] == "0A" and int(row[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{row[9]}]")
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return True
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
    return False


def _env(base: str, ident: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    env.update(
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_LOG_DIR=os.path.join(base, "logs"),
        SPARK_PID_DIR=os.path.join(base, "pid"),
        SPARK_IDENT_STRING=ident,
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p),
    )
    return env


def _wait_started(port: int, pid_glob: str, base: str, timeout: float) -> int:
    """The server's pid once it listens on its gRPC port; RuntimeError with
    the log's end when it dies, another process holds the port (the server
    cannot bind it, and a client would wait on the other process's socket
    for an answer that never comes) or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    pid = 0
    while time.monotonic() < deadline:
        files = glob.glob(pid_glob)
        if files and not pid:
            with open(files[0]) as f:
                pid = int(f.read().strip() or 0)
        if pid and not _alive(pid):
            why = f"the Spark Connect server (pid {pid}) exited before it listened on port {port}"
            break
        if pid and _listening(port):
            if _listens(pid, port):
                return pid
            why = f"another process holds port {port}, not the Spark Connect server (pid {pid})"
            break
        time.sleep(0.5)
    else:
        why = f"the Spark Connect server did not start on port {port} within {timeout:g} s"
    logs = glob.glob(os.path.join(base, "logs", "*.out"))
    tail = _tail(logs[0]) if logs else "<no log>"
    raise RuntimeError(f"{why}:\n{tail}")


@contextlib.contextmanager
def connect_server(
    cores: int = 2,
    memory: str = "1g",
    conf: dict[str, str] | None = None,
    timeout: float = 120.0,
    hide: Sequence[str] = (),
) -> Iterator[ConnectServer]:
    """Start a Spark Connect server over ``local[cores]``; stop it on exit.
    ``hide``: directories the server sees as its own empty tmpfs, in a mount
    namespace of its own (``tests.e2e.cluster.isolated``; needs root): what
    it writes there the client never sees."""
    home = spark_home()
    start = os.path.join(home, "sbin", "start-connect-server.sh")
    stop = os.path.join(home, "sbin", "stop-connect-server.sh")
    if not os.path.isfile(start):
        raise FileNotFoundError(f"expected {start} (pyspark's wheel ships it), it does not exist")
    base = tempfile.mkdtemp(prefix="sparkmaxent-connect-")
    ident = f"sparkmaxent-{uuid.uuid4().hex[:8]}"
    env = _env(base, ident)
    port = free_port()
    settings = {
        "spark.connect.grpc.binding.address": LOOPBACK,
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.local.dir": os.path.join(base, "local"),
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
        **(conf or {}),
    }
    args = ["--master", f"local[{cores}]", "--driver-memory", memory]
    for key, value in settings.items():
        args += ["--conf", f"{key}={value}"]
    pid = 0
    try:
        subprocess.run(
            isolated(["bash", start, *args], hide),
            env=env,
            cwd=base,
            check=True,
            timeout=60,
            capture_output=True,
        )
        pid_glob = os.path.join(base, "pid", f"spark-{ident}-*.pid")
        pid = _wait_started(port, pid_glob, base, timeout)
        logs = glob.glob(os.path.join(base, "logs", "*.out"))
        yield ConnectServer(f"sc://{LOOPBACK}:{port}", port, base, logs[0] if logs else "", pid)
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            subprocess.run(["bash", stop], env=env, timeout=30, capture_output=True)
        deadline = time.monotonic() + 15
        while pid and _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        if pid and _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)

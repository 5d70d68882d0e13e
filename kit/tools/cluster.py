"""A Spark cluster on this machine: a standalone master, workers and a Spark Connect server,
each its own process started from the Spark that pip installed -- what ``make cluster``
starts, the cluster test runs on and the benchmarks compare local mode with.

    python -m kit.tools.cluster start [FOLDER]    # make cluster: prints the URLs to use
    python -m kit.tools.cluster stop [FOLDER]     # make cluster-stop

    kit.spark(master="spark://127.0.0.1:<port>")   # or SPARK_MASTER=...
    kit.spark(master="sc://127.0.0.1:<port>")      # or SPARK_REMOTE=...

Everything listens on 127.0.0.1 only, on free ports chosen at start (the master's REST
server is off; web UIs on ports of their own). The processes' ids, URLs and logs are in
``FOLDER`` (default ``build/cluster``): ``cluster.json``, ``*.log``, the workers' directories.

=======================  ==================================================================
process                  what
=======================  ==================================================================
master                   ``org.apache.spark.deploy.master.Master``
worker-<i>               ``org.apache.spark.deploy.worker.Worker``, ``cores`` / ``memory`` each;
                         its executors run ``python`` (``PYSPARK_PYTHON``)
connect                  ``SparkConnectServer``, an application of the master (at most
                         ``connect_cores`` of its cores, the rest left to other drivers) or of
                         ``connect_master`` (e.g. ``local[2]``)
=======================  ==================================================================

Java comes from ``kit.java.ensure_java``. The daemons' JVMs take ``SPARK_DAEMON_MEMORY``
(default here 256m); executors ``spark.executor.memory`` of their driver (Spark's default 1g).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..errors import KitError
from ..java import ensure_java
from ..jvm import jar
from ..jvm.bridge import PLUGIN

__all__ = ["Cluster", "free_port"]

START_TIMEOUT = 120   # seconds for the master, its workers and the Connect server to be up


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 (the system's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Cluster:
    """A local standalone cluster (and Connect server) whose state lives in ``folder``."""

    folder: Path = Path("build/cluster")
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    connect: bool = True
    connect_master: str | None = None   # None: the cluster's master
    connect_cores: int = 1
    python: str = sys.executable
    master_url: str = ""
    connect_url: str = ""
    pids: dict = field(default_factory=dict)

    def __post_init__(self):
        self.folder = Path(self.folder).resolve()
        self._processes: dict[str, subprocess.Popen] = {}   # those this object started

    # ------------------------------------------------------------------ start

    def start(self, wait: bool = True) -> Cluster:
        """Start every process, then wait until the master listens and, with ``wait``, until
        the workers registered and Connect listens (else ``ready()`` does, later: a driver may
        start meanwhile); on any failure (or ``START_TIMEOUT``), stop what started and raise
        ``KitError``."""
        if (self.folder / "cluster.json").exists():
            raise KitError(f"a cluster was started in {self.folder} already: stop it first "
                           f"(python -m kit.tools.cluster stop {self.folder})")
        ensure_java()
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "work").mkdir(exist_ok=True)
        properties = self.folder / "daemons.properties"
        properties.write_text("spark.master.rest.enabled false\nspark.worker.cleanup.enabled true\n")
        port = free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        try:
            self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                        "--webui-port", str(free_port()), "--properties-file", str(properties))
            for i in range(1, self.workers + 1):
                self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                            "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
                            "--work-dir", str(self.folder / "work"), "--properties-file", str(properties),
                            self.master_url)
            if self.connect:   # it starts while the workers do: it waits for none of them
                self._start_connect()
            self._save()
            self._wait(lambda: _listening(port), "the master to listen")
            if wait:
                self.ready()
        except BaseException:
            self.stop()
            raise
        return self

    def ready(self) -> Cluster:
        """Wait until every worker registered with the master and the Connect server listens."""
        try:
            self._wait(lambda: self._registered() >= self.workers, f"{self.workers} workers to register")
            if self.connect:
                port = int(self.connect_url.rsplit(":", 1)[1])
                self._wait(lambda: _listening(port), "the Spark Connect server to listen")
        except BaseException:
            self.stop()
            raise
        return self

    def _env(self, daemon: bool = True) -> dict:
        memory = {"SPARK_DAEMON_MEMORY": os.environ.get("SPARK_DAEMON_MEMORY", "256m")} if daemon else {}
        return {**os.environ, **memory, "SPARK_HOME": str(_spark_home()), "PYSPARK_PYTHON": self.python,
                "SPARK_WORKER_DIR": str(self.folder / "work")}

    def _spawn(self, name: str, main: str, *args: str, submit: bool = False) -> None:
        tool = _spark_home() / "bin" / ("spark-submit" if submit else "spark-class")
        with open(self.folder / f"{name}.log", "w") as log:
            process = subprocess.Popen([str(tool), *([] if submit else [main]), *args],
                                       env=self._env(daemon=not submit),
                                       cwd=self.folder / "work", stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        self.pids[name] = process.pid
        self._processes[name] = process

    def _start_connect(self) -> None:
        port = free_port()
        master = self.connect_master or self.master_url
        conf = {"spark.connect.grpc.binding.port": port, "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.ui.enabled": "false", "spark.executor.memory": "512m",
                "spark.cores.max": self.connect_cores, "spark.pyspark.python": self.python}
        helpers = jar()
        if helpers is not None:   # the kit's Java classes, and its plugin that reaches the JVM (kit.jvm.bridge)
            conf["spark.connect.extensions.relation.classes"] = PLUGIN
        args = ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", master,
                "--name", "flink-kit-connect", "--driver-memory", "1g",
                *(["--jars", str(helpers)] if helpers is not None else [])]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        self._spawn("connect", "", *args, "spark-internal", submit=True)
        self.connect_url = f"sc://127.0.0.1:{port}"

    def _registered(self) -> int:
        log = (self.folder / "master.log").read_text(errors="replace")
        return len(re.findall(r"Registering worker 127\.0\.0\.1:\d+", log))

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():
            for name, process in self._processes.items():
                if process.poll() is not None:
                    raise KitError(f"{name} of the local cluster stopped (exit {process.returncode}) while waiting "
                                   f"for {what}; last lines of {self.folder / (name + '.log')}:\n"
                                   + _tail(self.folder / f"{name}.log"))
            if time.monotonic() > deadline:
                raise KitError(f"the local cluster did not get {what} within {START_TIMEOUT} s; "
                               f"its logs are in {self.folder}")
            time.sleep(0.25)

    def _save(self) -> None:
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state["folder"] = str(self.folder)
        (self.folder / "cluster.json").write_text(json.dumps(state, indent=1) + "\n")

    # ------------------------------------------------------------------ stop

    @classmethod
    def load(cls, folder: Path | str = "build/cluster") -> Cluster:
        """The cluster started in ``folder`` (its ``cluster.json``)."""
        state = json.loads((Path(folder) / "cluster.json").read_text())
        return cls(**state)

    def stop(self, timeout: float = 30) -> None:
        """Stop its processes (each process group: SIGTERM, then SIGKILL after ``timeout``),
        Connect first and the master last; forget the state file."""
        order = ["connect"] + sorted(n for n in self.pids if n.startswith("worker")) + ["master"]
        for name in order:
            pid = self.pids.get(name)
            if pid is None or (name not in self._processes and not _spark_process(pid)):
                continue   # gone; or, after a reboot, the id of another program
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _running(pid, self._processes.get(name)) and time.monotonic() < deadline:
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self.pids = {}
        (self.folder / "cluster.json").unlink(missing_ok=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _spark_process(pid: int) -> bool:
    """Whether process ``pid`` runs Spark (its command line names ``org.apache.spark``)."""
    try:
        return b"org.apache.spark" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _running(pid: int, process: subprocess.Popen | None) -> bool:
    if process is not None:
        return process.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):   # a zombie of another parent counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    return True


def _tail(path: Path, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kit.tools.cluster", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("folder", nargs="?", default="build/cluster", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2, help="cores per worker (default 2)")
    parser.add_argument("--memory", default="2g", help="memory per worker (default 2g)")
    parser.add_argument("--connect-cores", type=int, default=2, help="cores the Connect server takes (default 2)")
    args = parser.parse_args(argv)
    try:
        if args.action == "stop":
            if not (args.folder / "cluster.json").exists():
                print(f"no cluster started in {args.folder}")
                return 0
            Cluster.load(args.folder).stop()
            print(f"stopped the cluster of {args.folder}")
            return 0
        cluster = Cluster(args.folder, workers=args.workers, cores=args.cores, memory=args.memory,
                          connect_cores=args.connect_cores).start()
    except KitError as e:
        print(f"kit.tools.cluster: {e}", file=sys.stderr)
        return 1
    print(f"SPARK_MASTER={cluster.master_url}\nSPARK_REMOTE={cluster.connect_url}\n"
          f"logs and state: {cluster.folder}; stop with: make cluster-stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())

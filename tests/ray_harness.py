"""A real local Ray cluster for the tests and bench/bench_ray.py: a head and more worker nodes,
each a `ray start` of its own (its own raylet and object store), joined over 127.0.0.1.

Ray 2.60 turns token authentication on for `ray start --head`; the cluster gets a token of its
own, passed in the environment (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN) to its nodes and, through
``env``, to its drivers: nothing is written to ~/.ray. ``stop`` ends the processes of this
cluster only (found by its temp dir), never other Ray clusters on the machine.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_bin() -> str:
    exe = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    if exe is None:
        raise RuntimeError("the `ray` command is not installed beside this Python (pip install 'fastaxo[ray]')")
    return exe


class LocalCluster:
    """``nodes`` nodes of ``cpus`` CPUs each (the first is the head), object stores of
    ``object_store`` bytes. ``address`` to connect to, ``env`` for a driver's environment."""

    def __init__(self, nodes: int = 2, cpus: int = 1, object_store: int = 300_000_000, prefix: str = "fxr-"):
        # short: Ray's socket paths under the temp dir have a length limit
        self.tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"}
        env = {**os.environ, **self.env}
        env.pop("FASTAXO_RAY_TEST_HOLD", None)
        common = [f"--num-cpus={cpus}", "--node-ip-address=127.0.0.1", f"--object-store-memory={object_store}",
                  "--disable-usage-stats"]
        cmds = [[ray_bin(), "start", "--head", f"--port={self.port}", "--include-dashboard=false",
                 f"--temp-dir={self.tmp}", *common]]
        cmds += [[ray_bin(), "start", f"--address={self.address}", *common]] * (nodes - 1)
        try:
            for c in cmds:
                r = subprocess.run(c, env=env, capture_output=True, text=True, timeout=300, cwd="/")
                if r.returncode:
                    raise RuntimeError(f"{' '.join(c)} exited {r.returncode}: {r.stdout[-2000:]} {r.stderr[-2000:]}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM, then SIGKILL, every process whose command line names this cluster's temp dir
        (GCS, raylets and their helpers; workers exit with their raylet)."""
        import psutil

        procs = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            try:
                if p.info["pid"] != os.getpid() and any(self.tmp in a for a in (p.info["cmdline"] or [])):
                    procs.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        for p in procs:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=15)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)

"""A real OpenSSH server for the environment tests: Debian's ``sshd`` on 127.0.0.1 at a free port, with its own
host key, a throwaway client key in ``authorized_keys`` and another key it refuses, all under one folder.

It runs in a private mount namespace (``unshare -m``) where ``/run`` is a fresh tmpfs (sshd's privilege
separation folder) and the login user's home is a folder of the test (``remote_home``), so what the agent
copies or writes "on the other side" lands there and the machine's own home stays untouched. The client
side gets the same care: ``client_path`` is a folder whose ``ssh`` and ``scp`` run the real clients with a
config that keeps known hosts in the test's folder; put it first in the server's ``PATH``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from talaria_testing import process_leaks

SSHD = "/usr/sbin/sshd"


def available() -> str:
    """Why the server cannot run here ("" when it can)."""
    if not Path(SSHD).exists():
        return "openssh-server is not installed (scripts/test.sh installs it)"
    if not shutil.which("unshare") or not shutil.which("ssh-keygen"):
        return "unshare or ssh-keygen is missing"
    if os.geteuid() != 0:
        return "the private mount namespace needs root"
    return ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


class SshServer:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.user = pwd.getpwuid(os.geteuid()).pw_name
        self.home = pwd.getpwuid(os.geteuid()).pw_dir
        self.remote_home = self.root / "remote_home"
        (self.remote_home / ".ssh").mkdir(parents=True, exist_ok=True)
        self.remote_home.chmod(0o700)
        self.host_key = _keygen(self.root / "host_key")
        self.client_key = _keygen(self.root / "client_key")
        self.refused_key = _keygen(self.root / "refused_key")
        self.authorized_keys = self.remote_home / ".ssh" / "authorized_keys"
        self.authorized_keys.write_text(Path(f"{self.client_key}.pub").read_text())
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.root / "sshd.log"
        self.client_path = self._client_shims()

    def _client_shims(self) -> Path:
        folder = self.root / "client_bin"
        folder.mkdir(exist_ok=True)
        config = self.root / "ssh_client_config"
        config.write_text(f"UserKnownHostsFile {self.root / 'known_hosts'}\nGlobalKnownHostsFile /dev/null\n")
        for tool in ("ssh", "scp"):
            shim = folder / tool
            shim.write_text(f'#!/bin/sh\nexec /usr/bin/{tool} -F "{config}" "$@"\n')
            shim.chmod(0o755)
        return folder

    def _config(self) -> Path:
        path = self.root / "sshd_config"
        path.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {self.authorized_keys}",
                    "PidFile none",
                    "StrictModes no",
                    "UsePAM no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "",
                ]
            )
        )
        return path

    def start(self, timeout: float = 10.0) -> SshServer:
        script = (
            "mount -t tmpfs none /run && mkdir -m 755 /run/sshd && "
            f'mount --bind "{self.remote_home}" "{self.home}" && '
            f'exec {SSHD} -D -e -f "{self._config()}"'
        )
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it; closed below
        try:
            self.proc = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sshd did not listen on {self.port}: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def drop(self) -> None:
        """Stop the server and cut every open connection (stopping sshd alone leaves them running), as a
        host that goes down does."""
        if self.proc is None:
            return
        sessions = list(process_leaks.live_descendants(self.proc.pid))
        self.stop()
        for pid in sessions:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def definition(self, name: str, *, key: Path | None = None, port: int | None = None) -> dict:
        """The body of ``POST /api/environments`` for this server."""
        return {
            "name": name,
            "backend": "ssh",
            "ssh_host": "127.0.0.1",
            "ssh_user": self.user,
            "ssh_port": port or self.port,
            "ssh_key": str(key or self.client_key),
        }

    def __enter__(self) -> SshServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def docker_daemon_answers() -> bool:
    docker = shutil.which("docker")
    if not docker:
        return False
    try:
        return subprocess.run([docker, "version"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False

"""A real OpenSSH ``sshd`` on 127.0.0.1, the server RunPod's images run, for transport tests.

The mock's pods speak asyncssh's server; real pods run OpenSSH, which differs where it matters
(an SFTP read is capped at 261,120 bytes; the login shell is whatever the image has, here
``/bin/sh``, dash on Debian). So the remote path's tests run against both. This server runs
as root (CI runs as root), logs a dedicated user in (made once per test process, home in a
temporary directory, login shell ``/bin/sh``), and can drop every client connection.

It needs ``/usr/sbin/sshd`` (Debian's ``openssh-server``; ``scripts/setup`` installs it when it
can): when it is missing the tests that need it fail with that sentence, they do not skip.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import asyncssh

SSHD = Path("/usr/sbin/sshd")
MISSING = ("OpenSSH's sshd is not installed (/usr/sbin/sshd): run ./scripts/setup as root, or "
           "`apt-get install openssh-server`")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (per-connection sshd processes and what they run)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, frontier = [], {pid}
    while frontier:
        nxt = {p for p, pp in parents.items() if pp in frontier}
        out.extend(nxt)
        frontier = nxt
    return out


def kill_processes_in(root: Path) -> int:
    """SIGKILL every process whose working directory is inside ``root`` (the detached job and
    watchdog a test launched there outlive the SSH session on purpose)."""
    root = root.resolve()
    killed = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{entry.name}/cwd"))
        except OSError:
            continue
        if cwd == root or root in cwd.parents:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


class LoginUser:
    """One login user for this test process (made with useradd, removed at exit)."""

    def __init__(self) -> None:
        self.name = f"tplabssh{os.getpid()}"
        self.home = Path(tempfile.mkdtemp(prefix="tplab-openssh-home-"))
        os.chmod(self.home, 0o755)
        try:
            pwd.getpwnam(self.name)
        except KeyError:
            # "-p *": no password, but not a locked account (sshd refuses those, keys and all)
            subprocess.run(["useradd", "-M", "-d", str(self.home), "-s", "/bin/sh", "-p", "*",
                            self.name], check=True, capture_output=True)
        entry = pwd.getpwnam(self.name)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid
        os.chown(self.home, self.uid, self.gid)

    def own(self, path: Path) -> None:
        """Hand files the test wrote (as root) to the login user."""
        for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
            os.chown(p, self.uid, self.gid)

    def clean(self) -> None:
        for child in self.home.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    def remove(self) -> None:
        subprocess.run(["userdel", self.name], capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)


class OpenSSHServer:
    """Same face as tests/lab/sshserver.py's SandboxServer: ``root``, ``port``, ``host_key``,
    ``start()``, ``stop()``, ``drop_all()``; plus ``user`` (the login name) and ``own(path)``."""

    def __init__(self, user: LoginUser, authorized: asyncssh.SSHKey,
                 host_key: asyncssh.SSHKey | None = None) -> None:
        if not SSHD.exists():
            raise AssertionError(MISSING)
        self._user = user
        self.user = user.name
        self.root = user.home
        self.host_key = host_key or asyncssh.generate_private_key("ssh-ed25519")
        self._authorized = authorized
        self._dir = Path(tempfile.mkdtemp(prefix="tplab-openssh-"))
        os.chmod(self._dir, 0o755)  # sshd reads authorized_keys as the user
        self._proc: subprocess.Popen | None = None
        self.port = 0
        self.env_file = self.root / "rp_environment"

    def own(self, path: Path) -> None:
        self._user.own(path)

    async def start(self, port: int = 0) -> None:
        self.port = port or _free_port()
        key_path = self._dir / "host_ed25519"
        key_path.write_bytes(self.host_key.export_private_key("openssh"))
        key_path.chmod(0o600)
        (self._dir / "authorized_keys").write_text(
            self._authorized.export_public_key("openssh").decode())
        (self._dir / "authorized_keys").chmod(0o644)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # OpenSSH's privilege-separation dir
        (self._dir / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {key_path}\n"
            f"PidFile {self._dir / 'sshd.pid'}\nAuthorizedKeysFile {self._dir / 'authorized_keys'}\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            f"AllowUsers {self.user}\nSubsystem sftp internal-sftp\n"
            f"SetEnv TPLAB_RP_ENV_FILE={self.env_file}\nLogLevel ERROR\n")
        self._proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(self._dir / "sshd_config")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise AssertionError(f"sshd did not start: {self._proc.stderr.read().decode()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                await asyncio.sleep(0.05)
        raise AssertionError("sshd did not listen within 10 s")

    def _signal_connections(self, sig: int) -> int:
        if self._proc is None:
            return 0
        kids = []
        for pid in _children(self._proc.pid):
            try:
                if "sshd" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    kids.append(pid)
            except OSError:
                continue
        for pid in kids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return len(kids)

    def drop_all(self) -> int:
        """Kill every per-connection sshd (the listener stays): the clients see a dead TCP link."""
        return self._signal_connections(signal.SIGKILL)

    def freeze_all(self) -> int:
        """Stop every per-connection sshd (SIGSTOP): the link stays open and nothing answers,
        which only the client's keepalive can notice."""
        return self._signal_connections(signal.SIGSTOP)

    async def stop(self) -> None:
        if self._proc is not None:
            for pid in _children(self._proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc.stderr.close()
            self._proc = None
        shutil.rmtree(self._dir, ignore_errors=True)

"""A fork server for the tier-1 workers: one helper process with the refiner imported that forks each worker and
sends back its pid and socket.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

from refiner.proxy import work

READY = b"R"
FORK = b"F"
PID_BYTES = 8
START_TIMEOUT = 120.0  # seconds for the helper to import the refiner


class ForkServer:
    """``start()`` launches the helper with the state pickled in ``blob`` (given to every worker); ``fork()`` returns
    ``(pid, socket, pidfd)`` of a new worker (which ends when its connection closes; ``pidfd`` None where the OS has
    none)."""

    def __init__(self, blob: bytes) -> None:
        self.blob = blob
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._ctrl: socket.socket | None = None

    def start(self) -> None:
        """Starts the helper unless it is running."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()

    def _start(self) -> None:
        self._stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = ("import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
                "from refiner.proxy.forks import serve; serve(int(sys.argv[2]))")
        try:
            proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(sys.path), str(theirs.fileno())],
                                    stdin=subprocess.PIPE, pass_fds=[theirs.fileno()], close_fds=True)
        finally:
            theirs.close()
        try:
            proc.stdin.write(self.blob)
            proc.stdin.close()
            ours.settimeout(START_TIMEOUT)
            if ours.recv(1) != READY:
                raise RuntimeError(f"the worker fork server exited during start-up (code {proc.poll()})")
            ours.settimeout(None)
        except BaseException:
            proc.kill()
            ours.close()
            raise
        self._proc, self._ctrl = proc, ours

    def fork(self) -> tuple[int, socket.socket, int | None]:
        """A new worker (restarting the helper first when it has died); thread-safe."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            try:
                self._ctrl.sendall(FORK)
                msg, fds, _, _ = socket.recv_fds(self._ctrl, PID_BYTES, 2)
            except OSError:
                self._stop()
                raise
            if len(msg) != PID_BYTES or not fds:
                for fd in fds:
                    os.close(fd)
                self._stop()
                raise RuntimeError("the worker fork server did not answer")
        return int.from_bytes(msg, "little"), socket.socket(fileno=fds[0]), fds[1] if len(fds) > 1 else None

    def _stop(self) -> None:
        if self._ctrl is not None:
            self._ctrl.close()  # the helper sees EOF and exits
            self._ctrl = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
            self._proc = None


_SHARED: dict[bytes, ForkServer] = {}
_SHARED_LOCK = threading.Lock()


def shared(state: Any) -> ForkServer:
    """The fork server for ``state``, shared by every pool of this process with an equal state; it lives until this
    process exits, and is stopped then."""
    blob = pickle.dumps(state)
    with _SHARED_LOCK:
        server = _SHARED.get(blob)
        if server is None:
            if not _SHARED:
                atexit.register(_stop_shared)
            server = _SHARED[blob] = ForkServer(blob)
        return server


def _stop_shared() -> None:
    for server in list(_SHARED.values()):  # (at exit: no fork is asked for any more)
        server._stop()


def serve(fd: int) -> None:
    """The helper's main loop: reads the workers' state from stdin, answers ``READY``, then forks one worker per
    ``FORK`` until the control socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    state = pickle.load(sys.stdin.buffer)
    gc.freeze()  # what is loaded now is shared by every worker: the collector leaves it alone (fewer copied pages)
    ctrl = socket.socket(fileno=fd)
    ctrl.sendall(READY)
    while True:
        try:
            request = ctrl.recv(1)
        except OSError:
            return
        if request != FORK:
            return
        parent_end, child_end = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                ctrl.close()
                parent_end.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                work.serve(child_end, state)
            except BaseException:  # noqa: BLE001 - a worker never returns into the helper's loop
                code = 1
            finally:
                os._exit(code)
        child_end.close()
        fds = [parent_end.fileno()]
        with contextlib.suppress(AttributeError, OSError):  # no pidfd on this OS: the pool kills by pid
            fds.append(os.pidfd_open(pid))
        try:
            socket.send_fds(ctrl, [pid.to_bytes(PID_BYTES, "little")], fds)
        except OSError:
            return
        finally:
            for pidfd in fds[1:]:
                os.close(pidfd)
            parent_end.close()

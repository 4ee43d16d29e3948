"""The kernel that executes a chapter: papermill, its environment, its sockets, and the check that
every cell ran.

    run_papermill(src, out, parameters, threads)   execute a chapter into ``out``; the wall time
    kernel_env(threads)                            what the kernel inherits (threads=1: one core)
    incomplete_cells(nb)                           the code cells that did not run to completion
    kill_kernels()                                 end every kernel this process started (Ctrl-C
                                                   of a build whose chapters run in threads)
    remove_stale_ipc_folders()                     the socket folders that killed runs left

A kernel talks to its executor over local IPC sockets in a private temporary folder (nothing
listens on a port); the folder is removed when the kernel has shut down.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

from tools import sources
from tools.parameters import check_parameters

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def kernel_env(threads: int | None = None) -> dict:
    """The kernel's environment: this one, with the repository on the path.  ``threads`` (the
    executor's share of the cores when several chapters run at once) sets OpenMP's, MKL's and
    OpenBLAS's thread counts, which torch reads when it starts; None leaves them as they are."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(sources.ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # idle OpenMP threads sleep, not spin (loaded machines)
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    if threads is not None:
        env.update({name: str(threads) for name in THREAD_VARIABLES})
    return env


IPC_PREFIX = "rnnbook-ipc-"                 # + the executing process's id + "-"
LEGACY_PREFIX = "rnnbook-kernel-"           # the socket folders of earlier versions (never removed)


_KERNELS: set = set()                      # the kernel managers of this process's running kernels
_KERNELS_LOCK = threading.Lock()


def _ipc_kernel_manager(folders: list[str], env: dict):
    """A kernel manager that talks to the kernel over local IPC sockets (in a private temporary
    folder, appended to ``folders`` so that the caller removes it) instead of TCP: nothing
    listens on a port, and ipykernel has no reason to warn that the kernel is "running over TCP
    without encryption" for every chapter.  The kernel starts with ``env`` (this process's own
    environment is left alone: chapters run in threads side by side) and is registered for
    :func:`kill_kernels` while it runs."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum, default

    class IPCKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        @default("ip")
        def _ip_default(self):
            folder = tempfile.mkdtemp(prefix=f"{IPC_PREFIX}{os.getpid()}-")
            folders.append(folder)
            return os.path.join(folder, "kernel")

        async def _async_pre_start_kernel(self, **kw):
            kw.setdefault("env", dict(env))
            with _KERNELS_LOCK:
                _KERNELS.add(self)
            return await super()._async_pre_start_kernel(**kw)

        async def shutdown_kernel(self, *args, **kw):
            try:
                return await super().shutdown_kernel(*args, **kw)
            finally:
                with _KERNELS_LOCK:
                    _KERNELS.discard(self)

    return IPCKernelManager


def kill_kernels() -> int:
    """Kill (SIGKILL, with their process groups) the kernels this process started that are still
    running; returns how many.  The executor calls it on Ctrl-C, until its workers have stopped: a
    kernel runs in a session of its own, so the terminal's interrupt does not reach it, and the
    thread that drives it would otherwise wait for its chapter to finish.  A kernel still being
    started (no process yet) stays registered, for the next call."""
    with _KERNELS_LOCK:
        managers = list(_KERNELS)
    killed = 0
    for km in managers:
        provisioner = getattr(km, "provisioner", None)
        pid, pgid = getattr(provisioner, "pid", None), getattr(provisioner, "pgid", None)
        if not (pid or pgid):
            continue
        try:
            if pgid:
                os.killpg(pgid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:                     # gone already
            pass
        with _KERNELS_LOCK:
            _KERNELS.discard(km)
    return killed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                  # exists, another user's
        return True
    return True


def remove_stale_ipc_folders(older_than: float = 3600.0) -> int:
    """Remove the socket folders that killed executions left in the temporary folder: a folder
    of this version names the process that made it and is removed (with the socket files of
    its dead kernel) once that process is gone; a folder of an earlier version only when it is
    empty and older than ``older_than`` seconds (the kernel of a live execution keeps its sockets
    there, and ``os.rmdir`` removes only empty folders).  Returns how many were removed."""
    import stat

    removed, now = 0, time.time()
    for folder in Path(tempfile.gettempdir()).glob(IPC_PREFIX + "*"):
        pid = folder.name[len(IPC_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or _alive(int(pid)) or not folder.is_dir():
                continue
            entries = list(folder.iterdir())
            if all(stat.S_ISSOCK(e.lstat().st_mode) for e in entries):   # only a dead kernel's sockets
                for e in entries:
                    e.unlink()
                folder.rmdir()
                removed += 1
        except OSError:              # not ours to remove, or gone meanwhile
            pass
    for folder in Path(tempfile.gettempdir()).glob(LEGACY_PREFIX + "*"):
        try:
            if folder.is_dir() and now - folder.stat().st_mtime > older_than:
                folder.rmdir()
                removed += 1
        except OSError:              # not empty (a compiled kernel's private folder, or in use)
            pass
    return removed


def run_papermill(src: Path, out: Path, parameters: dict | None = None, threads: int | None = None) -> float:
    """Convert ``src`` and execute it with papermill into ``out``; returns the wall time (s).
    ``parameters`` are checked (:func:`tools.parameters.check_parameters`) before the kernel
    starts; ``threads``: see :func:`kernel_env`.  Safe to call from several threads at once."""
    import papermill

    parameters = parameters or {}
    out.parent.mkdir(parents=True, exist_ok=True)
    folders: list[str] = []
    with sources.as_notebook(src, "input") as work:
        if parameters:
            check_parameters(src, parameters, work)
        t0 = time.perf_counter()
        try:
            papermill.execute_notebook(
                str(work), str(out), parameters=parameters, cwd=str(sources.BOOK), kernel_name="python3",
                progress_bar=False, log_output=False, report_mode=False,
                kernel_manager_class=_ipc_kernel_manager(folders, kernel_env(threads)),
            )
        finally:
            for folder in folders:       # the kernel has shut down: its socket folder goes with it
                shutil.rmtree(folder, ignore_errors=True)
    return time.perf_counter() - t0


def incomplete_cells(nb_path: Path) -> list[int]:
    """Indices of the code cells of an executed notebook that did not run to completion: never
    executed (no execution count), or ended with an error output.  [] for a complete notebook;
    an unreadable notebook counts as wholly incomplete ([-1])."""
    try:
        nb = json.loads(nb_path.read_text())
    except (OSError, ValueError):
        return [-1]
    bad = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code" or not "".join(cell.get("source", "")).strip():
            continue
        if cell.get("execution_count") is None or any(o.get("output_type") == "error"
                                                       for o in cell.get("outputs", [])):
            bad.append(i)
    if (nb.get("metadata", {}).get("papermill", {}) or {}).get("exception"):
        bad.append(-1)
    return bad


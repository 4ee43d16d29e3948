"""Files that survive a crash, a full disk and a second process: how the trainer's checkpoints
and the stored runs are written and read.

    write_bytes(path, data)    the whole file at once: a uniquely named temporary file in the
                               same folder, written, flushed to the disk (fsync), renamed over
                               ``path``, and the folder flushed -- a reader sees the old file or the
                               new one, never a part, and two writers never share a temporary file
                               (one a killed process left is removed by :func:`remove_temporaries`)
    save(path, obj)            ``torch.save`` through :func:`write_bytes`
    load_tensors(path, what)   ``torch.load(weights_only=True)``: tensors and plain containers
                               only -- a file that would run code when loaded is refused, naming it
    FileLock(path, what)       an exclusive ``fcntl`` lock that names its holder (pid, host,
                               command, since when) to the process it keeps waiting or refuses

A full disk is an :class:`OSError` with ``errno.ENOSPC`` whose message names the file and says
"no space left on the device" (torch's own writer reports it as an iostream or zip-container
error without either); the file it would have replaced is unchanged.
"""
from __future__ import annotations

import datetime as dt
import errno
import io
import json
import os
import pickle
import socket
import sys
import tempfile
import time
import weakref
from pathlib import Path

import torch

__all__ = ["write_bytes", "remove_temporaries", "save", "load_tensors", "fsync_folder", "FileLock", "LockHeld", "UnsafeFileError"]

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class UnsafeFileError(ValueError):
    """A file that holds more than tensors and plain containers: loading it could run code."""


class LockHeld(RuntimeError):
    """Another process holds the lock (the message, one line, names it)."""


def _no_space(path: Path, exc: OSError) -> OSError:
    try:
        st = os.statvfs(path.parent)
        free = f"{st.f_bavail * st.f_frsize:,} bytes free in {path.parent}"
    except OSError:
        free = f"in {path.parent}"
    return OSError(errno.ENOSPC, f"no space left on the device while writing {path} ({free}); "
                                 f"{path.name} is unchanged: free some space and run the command again")


def fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (a rename in it) to the disk, where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:                      # a platform whose folders cannot be opened: nothing to flush
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Replace ``path`` by ``data`` atomically and durably (see the module's docstring).

    Raises ``OSError(ENOSPC)`` naming ``path`` when the disk is full; on any failure the
    temporary file is removed and ``path`` is as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.errno in _NO_SPACE:
            raise _no_space(path, exc) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)
    return path


def remove_temporaries(path: str | Path) -> list[Path]:
    """Remove the temporary files that :func:`write_bytes` left beside ``path`` when its process
    was killed mid-write; call it only while holding the lock that every writer of ``path``
    holds (another writer's temporary file would go too).  Returns what was removed."""
    path = Path(path)
    gone = sorted(path.parent.glob(f".{path.name}.*.tmp"))
    for f in gone:
        f.unlink(missing_ok=True)
    return gone


def save(path: str | Path, obj) -> Path:
    """``torch.save(obj)`` written to ``path`` with :func:`write_bytes` (serialised in memory
    first, so that a full disk is reported by name)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return write_bytes(path, buffer.getbuffer())


def load_tensors(path: str | Path, what: str = "file", map_location="cpu", advice: str = ""):
    """``torch.load(path, weights_only=True)``: what the book stores is tensors and plain
    containers, and nothing else is read.

    Raises :class:`UnsafeFileError` (a ValueError) naming ``path`` for a file that holds other
    objects -- a pickle that would import a module or call a function when loaded -- and a
    ValueError naming ``path`` for a file that cannot be read (truncated, half-written, not a
    torch file); ``what`` says what the file should be, ``advice`` what to do about it."""
    path = Path(path)
    tail = f"; {advice}" if advice else ""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError as exc:
        detail = next((line.strip() for line in str(exc).splitlines()
                       if "GLOBAL" in line or "Unsupported" in line or "unsupported" in line), "")
        if "Weights only load failed" in str(exc):
            raise UnsafeFileError(
                f"{path} is refused: it holds objects other than tensors and plain containers, which a "
                f"{what} never holds, and loading them could run code ({detail or 'a weights-only load failed'})"
                f"{tail}") from None
        raise ValueError(f"{path} cannot be read as a {what} (UnpicklingError: {str(exc)[:200]}): truncated or "
                         f"damaged{tail}") from None
    except Exception as exc:  # noqa: BLE001 - torch's reader raises RuntimeError, EOFError, OSError, ...
        first = (str(exc).splitlines() or [""])[0][:160]
        raise ValueError(f"{path} cannot be read as a {what} ({type(exc).__name__}: {first}): the file is "
                         f"truncated, half-written or not a torch file{tail}") from None


def _holder() -> dict:
    try:
        command = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = " ".join([sys.executable, *sys.argv])
    return {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
            "since": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}


_HELD: "weakref.WeakValueDictionary[str, FileLock]" = weakref.WeakValueDictionary()


class FileLock:
    """An exclusive lock on ``path`` (``fcntl.flock``; the file holds its holder's pid, host,
    command and start) for ``what`` ("the join of teacher", ...).

    :meth:`acquire` takes it, waiting up to ``wait`` seconds for another process to let it go,
    then raises :class:`LockHeld` with one line naming the holder.  The kernel releases the lock
    when its process ends, however it ends: a lock file left behind holds nothing.  Used as a
    context manager it is released on leaving.  ``take_over``: a lock on the same path that an
    earlier, abandoned call of this same process still holds (an interrupted training whose
    objects are kept alive by its traceback) is released and taken, instead of refused."""

    def __init__(self, path: str | Path, what: str, wait: float = 0.0, take_over: bool = False):
        self.path, self.what, self.wait, self.take_over = Path(path), what, wait, take_over
        self._fd: int | None = None

    def holder(self) -> str:
        """Who holds the lock, as its file says."""
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        if not info:
            return "another process (it has not written its name yet)"
        command = " ".join(str(info.get("command", "?")).split())          # one line, whatever it was
        command = command if len(command) <= 160 else command[:157] + "..."
        return f"pid {info.get('pid', '?')} on {info.get('host', '?')} since {info.get('since', '?')} ({command})"

    def acquire(self) -> "FileLock":
        import fcntl

        if self._fd is not None:
            return self
        key = str(self.path.resolve())
        earlier = _HELD.get(key)
        if earlier is not None and earlier is not self and self.take_over:
            earlier.release()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno in _NO_SPACE:
                raise OSError(errno.ENOSPC, f"no space left on the device to create the lock file {self.path} of "
                                            f"{self.what}; nothing was changed: free some space and run the "
                                            "command again") from None
            raise
        try:
            deadline = time.monotonic() + self.wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        waited = f" (waited {self.wait:g} s)" if self.wait else ""
                        raise LockHeld(f"{self.what} is under way in another process{waited}: {self.holder()}; "
                                       f"run again when it has finished (lock: {self.path})") from None
                    time.sleep(0.1)
            try:                                  # the holder's name: a full disk leaves it unnamed, still locked
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(_holder()) + "\n").encode(), 0)
            except OSError as exc:
                if exc.errno not in _NO_SPACE:
                    raise
        except BaseException:
            os.close(fd)                          # never a descriptor (and its lock) left behind
            raise
        self._fd = fd
        _HELD[key] = self
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        import fcntl

        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> "FileLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            try:
                os.close(self._fd)          # closing the descriptor releases the lock
            except OSError:
                pass

"""Kill a process at its N-th change to the file system (the fault injection of the stored runs).

    python -m tests.kill_at_write N [--torn] [--pause FILE] -- paper ARGS...

counts, through an audit hook (``sys.addaudithook``), every operation of the process that changes
the file system -- a file opened for writing, a rename or replace, a removal, a folder made or
removed, a hard link, a ``torch.save`` -- and sends itself SIGKILL just before the N-th.  With
``--torn`` the N-th operation, which must open a file for writing, happens, and the process dies
in the middle of its first ``os.write``: half the bytes are written.  ``N = 0`` only counts: every
operation is printed to stderr (``write 3: os.rename results/x -> results/y``) and the command
runs to its end; ``N < 0``: nothing is counted (the command as it is).  ``--pause FILE``: at the N-th operation, instead of dying, the process writes
FILE and waits until FILE is removed (a second process can then be started while this one holds
what it holds at that point).

``paper ARGS`` is ``python -m tools.paper ARGS``, with one more run declared: ``_tiny``, two
groups of small in-context networks (:func:`register_tiny`), for tests that join a run often.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_CHANGES = {"os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.link", "os.symlink", "os.truncate",
            "shutil.rmtree", "shutil.move", "os.chmod"}


def register_tiny() -> None:
    """Declare ``_tiny``: two groups (a gated stack of widths 2 and 3, a GRU of width 2) trained on
    in-context regression with T = 3, four steps at the paper's scale."""
    from lib.book import experiments as ex

    exp = ex.Experiment("_tiny", dict(
        T=ex.fixed(3, "test"), d_x=ex.fixed(1, "test"), d_y=ex.fixed(1, "test"), batch=ex.fixed(2, "test"),
        sigma_w2=ex.fixed(1.0, "test"), sigma_x2=ex.fixed(1.0, "test"), steps=ex.Setting(2, 4, "test"),
        lr=ex.fixed(1e-3, "test"), lr_min=ex.fixed(1e-6, "test"), weight_decay=ex.fixed(1e-4, "test")))
    spec = ex.OnlineRun("_tiny", "test", "icl", (ex.Group((2, 3), (0, 1)), ex.Group((2,), (5,), kind="gru")),
                        snapshots=(2,), log_every=1)
    ex.RUNS["_tiny"] = (exp, spec)


def _is_write(event: str, args: tuple) -> bool:
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(path, int):
            return False
        if mode is not None:
            return any(c in str(mode) for c in "wax+")
        return bool((flags or 0) & _WRITE_FLAGS)
    return event in _CHANGES or event == "torch.save"


def _describe(event: str, args: tuple) -> str:
    if event == "open":
        args = args[:1]
    shown = []
    for a in args:
        if isinstance(a, (str, bytes, os.PathLike)):
            shown.append(os.fsdecode(a).replace(str(ROOT) + os.sep, ""))
    return f"{event} {' -> '.join(shown)}".strip()


class _Killer:
    def __init__(self, at: int, torn: bool, pause: str | None):
        self.at, self.torn, self.pause = at, torn, pause
        self.n = 0
        self.armed = False          # --torn: the next os.write is cut in half
        self.busy = False

    def hook(self, event: str, args: tuple) -> None:
        if self.busy or not _is_write(event, args):
            return
        self.busy = True
        try:
            self.n += 1
            if self.at == 0:
                print(f"write {self.n}: {_describe(event, args)}", file=sys.stderr, flush=True)
            elif self.n == self.at:
                if self.pause:
                    Path(self.pause).write_text(f"{os.getpid()} {_describe(event, args)}\n")
                    while Path(self.pause).exists():
                        time.sleep(0.05)
                elif self.torn:
                    if event != "open":
                        raise SystemExit(f"--torn: write {self.n} is {event}, not a file opened for writing")
                    self.armed = True
                else:
                    print(f"killed before write {self.n}: {_describe(event, args)}", file=sys.stderr, flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
        finally:
            self.busy = False

    def install(self) -> None:
        sys.addaudithook(self.hook)
        import torch

        save = torch.save

        def counted_save(obj, f, *args, **kw):
            if isinstance(f, (str, os.PathLike)):
                self.hook("torch.save", (f,))
            return save(obj, f, *args, **kw)

        torch.save = counted_save
        real_write = os.write

        def write(fd, data):
            if self.armed:
                half = bytes(data)[: max(1, len(data) // 2)]
                real_write(fd, half)
                print(f"killed in the middle of write {self.n} ({len(half)} of {len(data)} bytes written)",
                      file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            return real_write(fd, data)

        os.write = write


def main(argv: list[str]) -> int:
    if "--" not in argv:
        raise SystemExit(__doc__)
    own, command = argv[: argv.index("--")], argv[argv.index("--") + 1:]
    at = int(own[0])
    torn = "--torn" in own
    pause = own[own.index("--pause") + 1] if "--pause" in own else None
    if not command or command[0] != "paper":
        raise SystemExit("the command must be: paper ARGS...")
    register_tiny()
    killer = _Killer(at, torn, pause)
    if at >= 0:
        killer.install()
    from tools import paper

    code = paper.main(command[1:])
    if at == 0:
        print(f"writes: {killer.n}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

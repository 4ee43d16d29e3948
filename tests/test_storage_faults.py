"""Fault injection on what the paper-scale runs write and read: crafted, truncated and foreign
files, a full disk, a second process, and a kill at every write of a join.

Each row of ``ROWS`` does one fault to a small run (``_tiny``: two groups of small in-context
networks, ``tests/kill_at_write.py``) in a folder of its own and checks the behaviour the
runner must have; it returns one line saying what happened (``tests/test_fault_injection.py``
prints them in its table).  The join killed at each of its writes is one row a write (the
writes counted by an audit hook, the process killed with SIGKILL by ``tests/kill_at_write.py``),
each followed by a retry and, after the kill and after the retry, ``load_run`` of the stored and
of the replaced run.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import lib
from lib import storage
from lib.book import artefacts, experiments

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import kill_at_write  # noqa: E402  (tests/ is no package)
from tests.helpers import fault_rows

OLD_STEPS, NEW_STEPS = 4, 2                  # the stored run of _tiny, and the run that replaces it


def _paper():
    from tools import paper
    return paper


def _quiet_run(*args, **kw):
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        return _paper().run(*args, **kw)


def _sha(f: Path) -> str:
    return hashlib.sha256(Path(f).read_bytes()).hexdigest()


def _state(root: Path) -> dict:
    """load_run of the stored and of the replaced run of _tiny: steps, or the error's first line."""
    out = {}
    for which, replaced in (("stored", False), ("replaced", True)):
        try:
            out[which] = artefacts.load_run("_tiny", root, replaced=replaced)["meta"]["steps"]
        except (FileNotFoundError, ValueError) as exc:
            out[which] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return out


class Base:
    """A results folder with _tiny stored (4 steps) and a new 2-step run of it finished in
    runs/_tiny, waiting for ``--replace``; each row works on a copy."""

    def __init__(self, folder: Path):
        kill_at_write.register_tiny()
        self.folder = folder / "base"
        if not (self.folder / "runs" / "_tiny" / "group-1.pt").is_file():
            shutil.rmtree(self.folder, ignore_errors=True)
            _quiet_run("_tiny", OLD_STEPS, "cpu", False, None, self.folder)
            with pytest.raises(SystemExit, match="Pass --replace"):
                _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, self.folder)
        self.stored = {f: _sha(self.folder / "_tiny" / f) for f in ("run.pt", "meta.json")}
        self.manifest = artefacts.read_manifest(self.folder)

    def copy(self, to: Path) -> Path:
        shutil.rmtree(to, ignore_errors=True)
        shutil.copytree(self.folder, to)
        return to

    def check_replaced(self, root: Path) -> None:
        """The joined state: the new run stored, the old one byte for byte in replaced/, the
        manifest the old one's lines plus those, no folder of the join left."""
        assert _state(root) == {"stored": NEW_STEPS, "replaced": OLD_STEPS}, _state(root)
        for f, digest in self.stored.items():
            assert _sha(root / "_tiny" / "replaced" / f) == digest
        manifest = artefacts.read_manifest(root)
        assert set(manifest) == set(self.manifest) | {"_tiny/replaced/run.pt", "_tiny/replaced/meta.json"}
        assert not (root / "runs" / "_tiny").exists()
        assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == \
            ["MANIFEST.sha256", "_tiny", "runs"], sorted(p.name for p in root.iterdir())
        assert not list(root.rglob("*.tmp")), list(root.rglob("*.tmp"))


# --------------------------------------------------------------------------------------------------
# helpers: a crafted pickle, a full disk, a second process
# --------------------------------------------------------------------------------------------------
class _Payload:
    """What a crafted file runs when it is unpickled: it writes a file."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "the payload ran"))


def _crafted(f: Path, marker: Path, like: dict | None = None) -> None:
    """Replace ``f`` by a torch file whose dict (``like``'s keys, if given) carries a payload."""
    torch.save({**(like or {}), "payload": _Payload(marker)}, f)


@contextlib.contextmanager
def _full_disk(folder: Path, room: int = 0):
    """Every os.write into a file under ``folder`` fails with ENOSPC once ``room`` bytes have been
    written there (the disk fills up in the middle of a file)."""
    real, written = os.write, [0]
    folder = str(folder.resolve())

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.startswith(folder):
            n = len(data)
            if written[0] + n > room:
                left = max(0, room - written[0])
                if left:
                    real(fd, bytes(data)[:left])
                    written[0] += left
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written[0] += n
        return real(fd, data)

    os.write = write
    try:
        yield
    finally:
        os.write = real


def _child(fn) -> int:
    """Run ``fn`` in a forked process (a second real process); returns its pid."""
    pid = os.fork()
    if pid == 0:                                   # pragma: no cover - the child
        code = 0
        try:
            with contextlib.redirect_stdout(open(os.devnull, "w")), contextlib.redirect_stderr(open(os.devnull, "w")):
                fn()
        except BaseException:                     # noqa: BLE001
            code = 1
        os._exit(code)
    return pid


def _wait(pid: int, timeout: float = 300) -> int:
    """The child's exit code (-SIGNAL when killed)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"process {pid} did not finish in {timeout} s")


def _until(path: Path, timeout: float = 300) -> str:
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)
    time.sleep(0.05)
    return path.read_text()


def _cli(root: Path, *args: str, at: int = -1, pause: Path | None = None, wait: bool = True):
    """``python -m tests.kill_at_write AT [--pause FILE] -- paper ARGS --results ROOT``: a second
    process running the real command line."""
    cmd = [sys.executable, "-m", "tests.kill_at_write", str(at), *(["--pause", str(pause)] if pause else []),
           "--", "paper", *args, "--results", str(root), "--threads", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out, err


def _writes(root: Path, *args: str) -> list[str]:
    """The writes of ``paper ARGS`` on a copy of ``root``, in order (the audit hook's count)."""
    code, out, err = _cli(root, *args, at=0)
    return [line.split(": ", 1)[1] for line in err.splitlines() if line.startswith("write ")]


def _copy_without(base: "Base", tmp: Path, *groups: int) -> tuple[Path, Path]:
    """A copy of the base folder whose finished files of ``groups`` are removed: (root, runs/_tiny)."""
    root = base.copy(tmp / "r")
    work = root / "runs" / "_tiny"
    for i in groups:
        (work / f"group-{i}.pt").unlink()
    return root, work


# --------------------------------------------------------------------------------------------------
# the rows
# --------------------------------------------------------------------------------------------------
ROWS, row = fault_rows()


@row("crafted run.pt, its manifest line recomputed: load_run refuses it naming the file; nothing runs")
def crafted_run(base: Base, tmp: Path) -> str:
    root = base.copy(tmp / "r")
    f, marker = root / "_tiny" / "run.pt", tmp / "ran"
    _crafted(f, marker, torch.load(f, weights_only=True))
    from tools.common import update_manifest
    update_manifest(root, [f])
    with pytest.raises(storage.UnsafeFileError, match=f"{f}.*refused") as exc:
        artefacts.load_run("_tiny", root)
    assert not marker.exists()
    return str(exc.value).splitlines()[0][:170]


@row("crafted checkpoint in runs/NAME: the runner refuses it naming the file, before any training; nothing runs")
def crafted_checkpoint(base: Base, tmp: Path) -> str:
    root, work = _copy_without(base, tmp, 0)
    marker = tmp / "ran"
    _crafted(work / "group-0.checkpoint.pt", marker, {"config": {}, "step": 1})
    before = _sha(work / "group-1.pt")
    with pytest.raises(SystemExit, match="group-0.checkpoint.pt is refused") as exc:
        _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
    with pytest.raises(storage.UnsafeFileError, match="group-0.checkpoint.pt is refused"):
        artefacts.load_finished_groups("_tiny", root)
    config = {"steps": 2}
    with pytest.raises(storage.UnsafeFileError, match="group-0.checkpoint.pt is refused"):
        lib.online.Checkpoint(work / "group-0.checkpoint.pt", 1).load(config, "cpu")
    assert not marker.exists() and _sha(work / "group-1.pt") == before
    return str(exc.value).splitlines()[0][:170]


@row("crafted finished group file: load_finished_groups and the runner refuse it naming the file; nothing runs")
def crafted_group(base: Base, tmp: Path) -> str:
    root = base.copy(tmp / "r")
    f, marker = root / "runs" / "_tiny" / "group-1.pt", tmp / "ran"
    _crafted(f, marker, torch.load(f, weights_only=True))
    with pytest.raises(storage.UnsafeFileError, match="group-1.pt is refused"):
        artefacts.load_finished_groups("_tiny", root)
    with pytest.raises(SystemExit, match="group-1.pt is refused") as exc:
        _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
    assert not marker.exists() and _state(root)["stored"] == OLD_STEPS
    return str(exc.value).splitlines()[0][:170]


@row("group files as the runs in training write them (no run name, no index: commit 9861af8): read and joined")
def group_files_of_9861af8(base: Base, tmp: Path) -> str:
    root = base.copy(tmp / "r")
    work = root / "runs" / "_tiny"
    for i in (0, 1):                 # what 9861af8's run_group writes: the binding without run and group
        data = torch.load(work / f"group-{i}.pt", weights_only=True)
        assert (data.pop("run"), data.pop("group")) == ("_tiny", i)
        torch.save(data, work / f"group-{i}.pt")
    assert [g["index"] for g in artefacts.load_finished_groups("_tiny", root)["finished"]] == [0, 1]
    _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
    base.check_replaced(root)
    return "load_finished_groups reads both; the join replaces the stored run with them"


@row("half-written group-0.pt: named, as unreadable, before any group trains")
def truncated_group(base: Base, tmp: Path) -> str:
    root, work = _copy_without(base, tmp, 1)                   # group 1 would train first
    data = (work / "group-0.pt").read_bytes()
    (work / "group-0.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="group-0.pt cannot be read as a finished group file"):
        artefacts.load_finished_groups("_tiny", root)
    with pytest.raises(SystemExit, match="group-0.pt cannot be read.*truncated") as exc:
        _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
    assert not (work / "group-1.pt").exists()                  # nothing trained
    return str(exc.value)[:170]


@row("half-written checkpoint: named, as unreadable, before any group trains")
def truncated_checkpoint(base: Base, tmp: Path) -> str:
    root, work = _copy_without(base, tmp, 0, 1)
    (work / "group-0.checkpoint.pt").write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(SystemExit, match="group-0.checkpoint.pt cannot be read") as exc:
        _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
    assert not (work / "group-1.pt").exists()
    return str(exc.value)[:170]


@row("full disk while a checkpoint is written: OSError naming it, 'no space left'; the previous one intact")
def full_disk_checkpoint(base: Base, tmp: Path) -> str:
    ckpt = tmp / "ckpt.pt"
    task = lib.AttentionTeacherTask(*lib.lsa_teachers(3, [0, 1]), T=4, batch=2, x_std=0.5)

    def train(**kw):
        return lib.train_online(lib.StackedGatedRNN(3, [4, 4], 3, [0, 1]), task, steps=6, data_seeds=[0, 1],
                                log_every=1, checkpoint=ckpt, checkpoint_every=1, **kw)

    def stop(step, losses):
        if step == 3:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(on_log=stop)                                      # its last checkpoint: step 2
    before = ckpt.read_bytes()
    with _full_disk(tmp, room=1000), pytest.raises(OSError, match="no space left") as exc:
        train()
    assert exc.value.errno == errno.ENOSPC and str(ckpt) in str(exc.value)
    assert ckpt.read_bytes() == before and not list(tmp.glob("*.tmp"))
    assert train()["resumed_from"] == 2                         # space again: it resumes from the intact one
    return str(exc.value)[:170]


@contextlib.contextmanager
def _full_when_writing(name: str, room: int):
    """The disk fills up after ``room`` bytes of the file ``name`` (whatever folder it is in),
    for every writer that goes through lib.storage (checkpoints, group files, joins, manifest)."""
    real = storage.write_bytes

    def write_bytes(path, data):
        if Path(path).name != name:
            return real(path, data)
        with _full_disk(Path(path).parent, room=room):
            return real(path, data)
    storage.write_bytes = write_bytes
    try:
        yield
    finally:
        storage.write_bytes = real


def _join_on_a_full_disk(root: Path, name: str, room: int) -> SystemExit:
    """``python -m tools.paper run _tiny --steps 2 --replace`` with the disk full at ``name``:
    the SystemExit it ends with."""
    with _full_when_writing(name, room), pytest.raises(SystemExit, match="no space left") as exc:
        _paper().main(["run", "_tiny", "--steps", str(NEW_STEPS), "--results", str(root), "--replace"])
    return exc.value


@row("full disk while group-0.pt is written: the file named; the retry finishes the group from its checkpoint")
def full_disk_group(base: Base, tmp: Path) -> str:
    root, work = _copy_without(base, tmp, 0)
    exc = _join_on_a_full_disk(root, "group-0.pt", 100)
    assert "group-0.pt" in str(exc)
    assert not (work / "group-0.pt").exists() and (work / "group-0.checkpoint.pt").is_file()
    assert _state(root)["stored"] == OLD_STEPS
    _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
    base.check_replaced(root)
    return str(exc)[:170]


@row("full disk while the join writes run.pt, meta.json or the manifest: 'no space left', stored run whole")
def full_disk_join(base: Base, tmp: Path) -> str:
    seen = []
    for what, room in (("run.pt", 500), ("meta.json", 0), ("MANIFEST.sha256", 0)):
        root = base.copy(tmp / what)
        exc = _join_on_a_full_disk(root, what, room)
        state = _state(root)
        if what == "MANIFEST.sha256":                     # after the swap: the state is described
            assert "half done" in str(exc) and "join of _tiny swapped" in state["stored"], (exc, state)
        else:
            assert "Nothing was joined" in str(exc) and state["stored"] == OLD_STEPS, (exc, state)
        assert artefacts.read_manifest(root).keys() >= base.manifest.keys()
        _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
        base.check_replaced(root)
        seen.append(f"{what}: {str(exc)[:60]}...")
    return "; ".join(seen)


@row("an empty manifest (an earlier version's interrupted write): the join and the update refuse, nothing written")
def empty_manifest(base: Base, tmp: Path) -> str:
    from tools.common import update_manifest

    root = base.copy(tmp / "r")
    shutil.rmtree(root / "_tiny")                              # a first join: it would reach the manifest
    (root / "MANIFEST.sha256").write_text("")
    with pytest.raises(SystemExit, match="MANIFEST.sha256 exists but is empty") as exc:
        _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root)
    with pytest.raises(SystemExit, match="MANIFEST.sha256 exists but is empty"):
        update_manifest(root, [root / "runs" / "_tiny" / "group-0.pt"])
    assert (root / "MANIFEST.sha256").read_text() == "" and (root / "runs" / "_tiny" / "group-0.pt").is_file()
    assert not (root / "_tiny").exists() and not artefacts.joining_folder("_tiny", root).exists()
    return str(exc.value)[:170]


@row("a stored run left half-written (meta.json of 0 bytes) and --replace: refused, saying how to recover")
def half_stored(base: Base, tmp: Path) -> str:
    root = base.copy(tmp / "r")
    (root / "_tiny" / "meta.json").write_text("")
    with pytest.raises(SystemExit, match="is not a whole stored run.*checksum mismatch.*Restore") as exc:
        _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
    assert (root / "_tiny" / "run.pt").is_file() and not (root / "_tiny" / "replaced").exists()
    assert (root / "runs" / "_tiny" / "group-0.pt").is_file()            # the new run is kept
    shutil.copy(base.folder / "_tiny" / "meta.json", root / "_tiny" / "meta.json")   # restored
    _quiet_run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
    base.check_replaced(root)
    return str(exc.value)[:170]


def _teacher_protocol_checkpoint(root: Path, i: int) -> Path:
    """A checkpoint of teacher_protocol's group ``i`` (0: fresh sequences, 1: App. B.1's fixed
    pool) after 1 of 3 steps, as the runner writes it."""
    paper = _paper()
    train = lib.train_online

    def first_step_only(*args, **kw):
        def stop(step, losses):
            if step == 2:                                        # after step 1's checkpoint
                raise KeyboardInterrupt
        return train(*args, **{**kw, "log_every": 1, "checkpoint_every": 1, "on_log": stop})
    lib.train_online = first_step_only
    try:
        with pytest.raises(KeyboardInterrupt):
            paper.run_group(paper.Run.of("teacher_protocol", root), i, 3, "cpu", log_every=1)
    finally:
        lib.train_online = train
    return root / "runs" / "teacher_protocol" / f"group-{i}.checkpoint.pt"


@row("teacher_protocol's pool checkpoint in the fresh group's slot, and the reverse: refused naming both")
def swapped_pool_checkpoint(base: Base, tmp: Path) -> str:
    paper = _paper()
    seen = []
    for src, dst in ((1, 0), (0, 1)):
        root = tmp / f"from{src}"
        ckpt = _teacher_protocol_checkpoint(root, src)
        moved = ckpt.with_name(f"group-{dst}.checkpoint.pt")
        os.replace(ckpt, moved)
        with pytest.raises(SystemExit, match=rf"group-{dst}.checkpoint.pt is not a checkpoint of group {dst}.*"
                                             rf"group {src} in the checkpoint, {dst} declared.*pool") as exc:
            paper.run("teacher_protocol", 3, "cpu", False, 1, root, groups=[dst])
        with pytest.raises(ValueError, match=rf"group-{dst}.checkpoint.pt is not a checkpoint of group {dst}"):
            artefacts.load_finished_groups("teacher_protocol", root)
        with pytest.raises(ValueError, match="other settings: group .*'group': " + str(src) + r".* in the checkpoint, "
                                             r".*'group': " + str(dst) + ".* now"):
            paper.run_group(paper.Run.of("teacher_protocol", root), dst, 3, "cpu", log_every=1)   # the trainer too
        assert not (root / "runs" / "teacher_protocol" / f"group-{dst}.pt").exists()
        seen.append(str(exc.value).split(" (", 1)[1][:80])
    return "; ".join(seen)


@row("teacher_protocol's finished pool group in the fresh group's slot: refused (pool differs) by the listing and the join")
def swapped_pool_group(base: Base, tmp: Path) -> str:
    paper = _paper()
    root = tmp / "r"
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        paper.run_group(paper.Run.of("teacher_protocol", root), 1, 2, "cpu", log_every=1)
    work = root / "runs" / "teacher_protocol"
    os.replace(work / "group-1.pt", work / "group-0.pt")
    with pytest.raises(ValueError, match="group-0.pt is not group 0 .*group 1 in the file, 0 declared.*pool 50000"):
        artefacts.load_finished_groups("teacher_protocol", root)
    with pytest.raises(SystemExit, match="group-0.pt is not group 0") as exc:
        paper.run("teacher_protocol", 2, "cpu", False, 1, root, groups=[1])
    assert not (work / "group-1.pt").exists()                  # refused before training group 1
    return str(exc.value)[:170]


@row("two trainings of one group (two processes): the second refused in one line naming the first")
def two_trainings(base: Base, tmp: Path) -> str:
    root, work = _copy_without(base, tmp, 0)
    count = base.copy(tmp / "count")
    (count / "runs" / "_tiny" / "group-0.pt").unlink()
    writes = _writes(count, "run", "_tiny", "--steps", str(NEW_STEPS), "--group", "0")
    at = next(k for k, w in enumerate(writes, 1) if "group-0.checkpoint.pt" in w and w.startswith("open"))
    pause = tmp / "paused"
    first = _cli(root, "run", "_tiny", "--steps", str(NEW_STEPS), "--group", "0", "--replace", at=at, pause=pause,
                 wait=False)
    _until(pause)
    code, out, err = _cli(root, "run", "_tiny", "--steps", str(NEW_STEPS), "--group", "0")
    message = err.strip().splitlines()[-1]
    pause.unlink()
    assert first.wait(timeout=600) == 0, first.stderr.read()[-2000:]
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"the training of _tiny group 0 is under way in another process: pid {first.pid} on " in message
    assert "tests.kill_at_write" in message                       # the holder's command
    base.check_replaced(root)                                      # the first trained, then joined
    return message[:170]


_HOLD = """
import sys, time
from pathlib import Path
import lib
ckpt, pause = Path(sys.argv[1]), Path(sys.argv[2])
def hold(step, losses):
    if step == 1:
        pause.write_text("holding")
        while pause.exists():
            time.sleep(0.02)
lib.train_online(lib.StackedGatedRNN(3, [4], 3, [0]), lib.AttentionTeacherTask(*lib.lsa_teachers(3, [0]), T=4,
                 batch=2, x_std=0.5), steps=2, data_seeds=[0], log_every=1, checkpoint=ckpt, on_log=hold)
"""


@row("two trainings from one checkpoint file (train_online in two processes): the second refused naming the first")
def two_checkpoint_holders(base: Base, tmp: Path) -> str:
    ckpt, pause = tmp / "ckpt.pt", tmp / "paused"
    first = subprocess.Popen([sys.executable, "-c", _HOLD, str(ckpt), str(pause)], cwd=ROOT, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE)
    _until(pause)
    with pytest.raises(storage.LockHeld, match=f"training from the checkpoint {ckpt} is under way in another "
                                                f"process: pid {first.pid} on ") as exc:
        lib.train_online(lib.StackedGatedRNN(3, [4], 3, [0]), lib.AttentionTeacherTask(
            *lib.lsa_teachers(3, [0]), T=4, batch=2, x_std=0.5), steps=2, data_seeds=[0], log_every=1,
            checkpoint=ckpt)
    pause.unlink()
    assert first.wait(timeout=600) == 0, first.stderr.read()[-2000:]
    assert "\n" not in str(exc.value)
    return str(exc.value)[:170]


@row("two joins with --replace at once (two processes): the second refused naming the first; the stored run kept")
def two_joins(base: Base, tmp: Path) -> str:
    root = base.copy(tmp / "r")
    writes = _writes(base.copy(tmp / "count"), "run", "_tiny", "--steps", str(NEW_STEPS), "--replace")
    at = next(k for k, w in enumerate(writes, 1) if "_tiny.joining" in w)
    pause = tmp / "paused"
    first = _cli(root, "run", "_tiny", "--steps", str(NEW_STEPS), "--replace", at=at, pause=pause, wait=False)
    _until(pause)
    code, out, err = _cli(root, "run", "_tiny", "--steps", str(NEW_STEPS), "--replace")
    pause.unlink()
    assert first.wait(timeout=600) == 0, first.stderr.read()[-2000:]
    message = err.strip()
    assert code == 1 and len(message.splitlines()) == 1, err
    assert f"the join of _tiny is under way in another process: pid {first.pid} on " in message
    base.check_replaced(root)
    return message[:170]


@row("two manifest updates at once (two processes, 25 each): no line lost")
def two_manifest_updates(base: Base, tmp: Path) -> str:
    from tools.common import update_manifest

    root = tmp / "r"
    root.mkdir()
    files = {who: [root / f"{who}-{k}.txt" for k in range(25)] for who in ("a", "b")}
    for f in files["a"] + files["b"]:
        f.write_text(f.name)

    def updates(who):
        return lambda: [update_manifest(root, [f]) for f in files[who]]
    pids = [_child(updates(who)) for who in ("a", "b")]
    assert [_wait(p) for p in pids] == [0, 0]
    got = artefacts.read_manifest(root)
    assert sorted(got) == sorted(f.name for f in files["a"] + files["b"]), len(got)
    return f"{len(got)} of 50 lines"


@row("two processes write one file 40 times each: unique temporary names, never a crash, never a torn file")
def two_writers(base: Base, tmp: Path) -> str:
    f = tmp / "state.pt"
    big = {str(k): torch.full((20_000,), float(k)) for k in range(2)}

    def writes(value):
        def go():
            for _ in range(40):
                storage.save(f, {"who": value, **big})
        return go
    alive, codes, reads = {_child(writes(v)) for v in (1, 2)}, [], 0
    while alive:
        if f.exists():
            assert storage.load_tensors(f)["who"] in (1, 2)
            reads += 1
        for p in list(alive):
            done, status = os.waitpid(p, os.WNOHANG)
            if done:
                alive.discard(p)
                codes.append(status)
    assert codes == [0, 0], codes
    assert storage.load_tensors(f)["who"] in (1, 2) and not list(tmp.glob("*.tmp"))
    return f"both exited 0; {reads} reads while they wrote, each a whole file"


def join_kill_rows(base: Base, tmp: Path) -> list[tuple[str, str]]:
    """A join with --replace killed before each of its writes (and, for each file it writes,
    half-way through writing it), then retried: after the kill, load_run of the stored run gives
    the old run or describes the interrupted join, that of the replaced run the old run or
    nothing; after the retry, the new run stored and the old one replaced, byte for byte."""
    paper = _paper()
    count = base.copy(tmp / "count")
    events = tmp / "events"
    pid = _child(lambda: _run_killed(count, 0, False, events))
    assert _wait(pid) == 0
    writes = events.read_text().splitlines()
    trials = [(k, False) for k in range(1, len(writes) + 1)]
    trials += [(k, True) for k, w in enumerate(writes, 1) if w.startswith("open") and w.endswith(".tmp")]
    rows = []
    for k, torn in trials:
        root = base.copy(tmp / "k")
        code = _wait(_child(lambda: _run_killed(root, k, torn, None)))
        assert code == -signal.SIGKILL, (k, torn, code)
        after_kill = _state(root)
        stored, replaced = after_kill["stored"], after_kill["replaced"]
        # whole runs, or a refusal that describes the interrupted join: never the new run in
        # replaced/, never the new run stored without the old one replaced
        assert stored in (OLD_STEPS, NEW_STEPS) or "join of _tiny" in stored, after_kill
        assert replaced == OLD_STEPS or "join of _tiny" in str(replaced) or \
            (stored == OLD_STEPS and str(replaced).startswith("FileNotFoundError")), after_kill
        assert stored != NEW_STEPS or replaced == OLD_STEPS, after_kill
        joined = stored == NEW_STEPS and not (root / "runs" / "_tiny").exists()
        if not joined:                  # (killed after the join was done: a retry would be a new run)
            with contextlib.redirect_stdout(open(os.devnull, "w")):
                paper.run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
        base.check_replaced(root)
        what = ("torn in " if torn else "before ") + writes[k - 1].replace(str(root), "R").replace(str(count), "R")
        rows.append((f"join killed {what[:90]}", f"after the kill: stored {after_kill['stored']!s:.60}, "
                     f"replaced {after_kill['replaced']!s:.40}; " + ("the join was done: no retry" if joined else
                     f"after the retry: stored {NEW_STEPS}, replaced {OLD_STEPS} (byte for byte)")))
    return rows


def _run_killed(root: Path, at: int, torn: bool, events: Path | None) -> None:
    killer = kill_at_write._Killer(at, torn, None)
    if events is not None:
        log = []
        original = killer.hook

        def hook(event, args):
            if not killer.busy and kill_at_write._is_write(event, args):
                log.append(kill_at_write._describe(event, args))
            original(event, args)
        killer.hook = hook
    killer.install()
    _paper().run("_tiny", NEW_STEPS, "cpu", False, None, root, replace=True)
    if events is not None:
        events.write_text("\n".join(log) + "\n")


# --------------------------------------------------------------------------------------------------
# pytest
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def base(tmp_path_factory):
    saved = experiments.RUNS.get("_tiny")
    yield Base(tmp_path_factory.mktemp("storage"))
    if saved is None:
        experiments.RUNS.pop("_tiny", None)
    else:
        experiments.RUNS["_tiny"] = saved


@pytest.mark.parametrize("name, fn", ROWS, ids=[fn.__name__ for _, fn in ROWS])
def test_storage_fault(base, tmp_path, name, fn):
    fn(base, tmp_path)


def test_a_join_killed_at_each_write_is_whole_after_its_retry(base, tmp_path):
    rows = join_kill_rows(base, tmp_path)
    assert len(rows) >= 20, rows                       # every write of the join, and every file torn


def test_every_stored_run_loads_as_tensors_only():
    """All stored runs of results/ and the runs they replaced load with weights_only=True, and
    hold what the full unpickler reads from them (the repository's own files, trusted here)."""
    def same(a, b):
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
        if isinstance(a, dict):
            return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return type(a) is type(b) and a == b
    files = sorted(artefacts.RESULTS.glob("*/run.pt")) + sorted(artefacts.RESULTS.glob("*/replaced/run.pt"))
    assert len(files) >= 8
    for f in files:
        assert same(storage.load_tensors(f), torch.load(f, weights_only=False)), f
    for name in experiments.RUNS:
        if (artefacts.RESULTS / name / "run.pt").is_file():
            artefacts.load_run(name)
        if (artefacts.RESULTS / name / "replaced" / "run.pt").is_file():
            artefacts.load_run(name, replaced=True)


def table(folder: Path) -> list[dict]:
    """Every row, run in ``folder``: {"case", "outcome" ("holds" or "FAILS"), "what"}."""
    base = Base(folder)
    out = []
    for name, fn in ROWS:
        tmp = folder / fn.__name__
        tmp.mkdir()
        try:
            out.append({"case": name, "outcome": "holds", "what": fn(base, tmp)})
        except BaseException as exc:  # noqa: BLE001 - the table reports it
            out.append({"case": name, "outcome": "FAILS", "what": f"{type(exc).__name__}: {exc}"[:300]})
    tmp = folder / "kills"
    tmp.mkdir()
    try:
        out += [{"case": c, "outcome": "holds", "what": w} for c, w in join_kill_rows(base, tmp)]
    except BaseException as exc:  # noqa: BLE001
        out.append({"case": "join killed at each write", "outcome": "FAILS", "what": f"{type(exc).__name__}: {exc}"})
    return out

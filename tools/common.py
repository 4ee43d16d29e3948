"""What the book's two tools share: provenance, the results manifest, and reading parameters.

``tools/book.py`` executes and builds the book, ``tools/paper.py`` makes the paper-scale runs;
both record where a result came from and both read ``-p NAME VALUE`` parameters, so those live
here once:

    git_commit(paths)      HEAD, marked when files under ``paths`` have uncommitted changes
    code_digest()          SHA-256 over lib/ (Python and C) and tools/ as they are now
    cpu_model(), machine_description(), device_name(device)
    update_manifest(root, files)   results/MANIFEST.sha256, one line a file (locked, atomic)
    parse_value(text)      a -p value, read as papermill's command line reads it
"""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ROOT", "git_commit", "code_digest", "cpu_model", "machine_description", "device_name",
           "manifest_lock", "check_manifest", "update_manifest", "parse_value"]


def git_commit(paths=("lib", "tools")) -> str:
    """The commit checked out, with "+uncommitted changes in ..." when files under ``paths``
    differ from it; outside a git checkout (a copy of the tree on another machine) the value of
    ``RNNBOOK_GIT_COMMIT`` if set, else "unknown"."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + (f"+uncommitted changes in {' or '.join(str(p) for p in paths)}" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("RNNBOOK_GIT_COMMIT", "unknown")


def code_digest() -> str:
    """SHA-256 over lib/**/*.py, lib/*.c and tools/*.py (names and contents), as they are now:
    the code a run executes."""
    h = hashlib.sha256()
    files = [*(ROOT / "lib").rglob("*.py"), *(ROOT / "lib").glob("*.c"), *(ROOT / "tools").glob("*.py")]
    for f in sorted(files):
        h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what platform knows of it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description() -> str:
    return f"{os.cpu_count()} cores, {cpu_model()}, Python {platform.python_version()}"


def device_name(device) -> str:
    """"CPU: <model>, N thread(s)" or the CUDA device's name."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU: {cpu_model()}, {torch.get_num_threads()} thread(s)"


def manifest_lock(root: Path, wait: float = 120.0):
    """The lock every update of ``root/MANIFEST.sha256`` holds (``root/.locks/MANIFEST.lock``):
    a second update waits for it up to ``wait`` seconds, then is refused naming the holder."""
    from lib.storage import FileLock

    return FileLock(Path(root) / ".locks" / "MANIFEST.lock", f"an update of {Path(root) / 'MANIFEST.sha256'}",
                    wait=wait)


def check_manifest(root: Path) -> None:
    """Refuse a manifest that exists but is empty (an update interrupted by an earlier version of
    the tools): every stored run's checksum is gone, and writing it would keep only new lines."""
    from lib.book.artefacts import manifest_path

    path = manifest_path(Path(root))
    if path.exists() and not path.read_text().strip():
        raise SystemExit(f"{path} exists but is empty: an update was interrupted by an earlier version of this "
                         f"tool and the stored runs' checksums are gone. Restore it (git checkout -- {path.name} "
                         f"in {root}) and run again")


def update_manifest(root: Path, files=(), lines: dict | None = None, drop=(), locked: bool = False) -> None:
    """Record the SHA-256 of ``files`` (under ``root``) in ``root/MANIFEST.sha256``, set the
    given ``lines`` ({path relative to root: SHA-256}) and remove the paths in ``drop``.

    The update holds :func:`manifest_lock` (unless the caller holds it: ``locked``) from the
    read to the write, so that two updates never lose a line, and the manifest is replaced
    atomically and durably (:func:`lib.storage.write_bytes`): a crash or a full disk leaves the
    previous manifest.  A manifest that exists but is empty or unreadable is refused (it would
    otherwise be rewritten with the new lines alone, dropping every other run's)."""
    from contextlib import nullcontext

    from lib.book.artefacts import manifest_path, read_manifest
    from lib.data import sha256
    from lib.storage import remove_temporaries, write_bytes

    root = Path(root)
    path = manifest_path(root)
    with nullcontext() if locked else manifest_lock(root):
        check_manifest(root)
        remove_temporaries(path)                 # of an update killed mid-write (the lock is ours)
        current = read_manifest(root)
        for f in files:
            current[Path(f).relative_to(root).as_posix()] = sha256(f)
        current.update(lines or {})
        for rel in drop:
            current.pop(rel, None)
        write_bytes(path, "".join(f"{d}  {r}\n" for r, d in sorted(current.items())).encode())


def parse_value(text: str):
    """A ``-p NAME VALUE`` value, read as papermill's command line reads it: True, False, None,
    an int, a float (1e-3 included), else the string itself.  In addition a value that starts
    with ``[`` or ``(`` is read as a list (YAML flow syntax), e.g. ``-p widths "[8, 16]"``."""
    import yaml

    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.strip().startswith(("[", "(")):
        value = yaml.safe_load(text.strip().replace("(", "[").replace(")", "]"))
        return [parse_value(str(v)) if isinstance(v, str) else v for v in value] if isinstance(value, list) else value
    return text

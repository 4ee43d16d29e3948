"""Small C kernels, compiled on first use with the system C compiler and loaded with ctypes.

Three hot loops of the library are written in C beside the module that uses them: the fused
Krylov pass of the Markov engine (``krylov.c``, used by :mod:`lib.krylov`), the element-wise part
of the gated RNN's training step (``gated.c``, used by :mod:`lib.gated_step`) and the element-wise
parts and recurrences of the LRU, LSTM and GRU networks' training step (``recurrent.c``, used by
:mod:`lib.recurrent_step`).  The two training-step kernels are written once for a type ``T``: the
file includes itself once for float and once for double, and every function exists as
``NAME_f32`` and ``NAME_f64`` (:func:`per_type` declares them, :func:`for_dtype` calls them with
tensors).  Each kernel has a benchmark row that measures what its C adds over the same algorithm
in torch (``benchmarks/``).  All three are loaded the same way, by :class:`CompiledKernel`:

* the source is compiled into the user cache (``$RNNBOOK_CACHE/kernels``, else
  ``~/.cache/rnnbook/kernels``), under a name that hashes the source, the compiler, its flags and
  the CPU (``-march=native`` builds are not shared between machines), with the SHA-256 of the
  built file recorded beside it; a folder that cannot be written is replaced by a private
  temporary one, removed when the process exits;
* a build is loaded only if its SHA-256 matches the recorded one (a truncated or replaced file
  is rebuilt), and only after a child process has loaded it without dying (a damaged library
  kills the process that maps it, not a recoverable error);
* once loaded it must reproduce the torch path on the caller's check case, on one thread and on
  several (a kernel wrong only when its threads share the work is caught whatever the thread
  count is when it is loaded); a kernel that does not is removed (the next process rebuilds it).

Any failure -- no compiler, a failed build, a library that cannot be loaded, a failed check --
falls back to the torch path with one ``RuntimeWarning``; ``RNNBOOK_KERNEL=0`` (or
false / no / off, any case) disables every kernel on purpose, without a warning.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

__all__ = ["CompiledKernel", "kernel_enabled", "cache_root", "same_loss_and_gradients", "per_type", "for_dtype"]

_FLAG_SETS = (["-O3", "-march=native", "-fopenmp"], ["-O3", "-fopenmp"])
_OFF = ("0", "false", "no", "off")


def kernel_enabled() -> bool:
    """False when RNNBOOK_KERNEL is 0 / false / no / off (any case)."""
    return os.environ.get("RNNBOOK_KERNEL", "1").strip().lower() not in _OFF


def cache_root() -> Path:
    """Where compiled kernels are kept: ``$RNNBOOK_CACHE/kernels``, else the user cache."""
    env = os.environ.get("RNNBOOK_CACHE")
    if env:
        return Path(env) / "kernels"
    base = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache")
    return Path(base) / "rnnbook" / "kernels"


def _cpu_tag() -> str:
    """What a -march=native build depends on: the CPU model and its feature flags."""
    text = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    text += line
                if line.strip() == "" and text:
                    break
    except OSError:
        pass
    return text or platform.processor() or platform.machine()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _valid_build(target: Path) -> bool:
    """The file exists and its SHA-256 is the one recorded when it was compiled."""
    try:
        return target.is_file() and _sidecar(target).read_text().strip() == _sha256(target)
    except OSError:
        return False


def _remove(target: Path) -> None:
    for f in (target, _sidecar(target)):
        try:
            f.unlink()
        except OSError:
            pass


def _loads_in_a_child(target: Path) -> str | None:
    """None when a fresh process maps the library and exits cleanly; else why not."""
    code = "import ctypes, sys; ctypes.CDLL(sys.argv[1])"
    try:
        res = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"loading {target} in a child process: {exc}"
    if res.returncode != 0:
        how = f"signal {-res.returncode}" if res.returncode < 0 else f"exit code {res.returncode}"
        return f"{target} killed or failed the process that loaded it ({how}): {res.stderr.strip()[-300:]}"
    return None


_private: dict[str, Path] = {}


def _private_folder() -> Path:
    """One temporary kernel folder for this process (when the cache cannot be written),
    removed when the process exits."""
    if "dir" not in _private:
        _private["dir"] = Path(tempfile.mkdtemp(prefix="rnnbook-kernel-"))
        atexit.register(shutil.rmtree, _private["dir"], True)
    return _private["dir"]


def same_loss_and_gradients(loss, loss_ref, grads, grads_ref) -> bool:
    """A training-step kernel's check: its loss equal to the reference's to 1e-12 (relative) and
    each gradient to 1e-10 (relative; 1e-14 absolute for entries near 0), in float64."""
    import torch  # noqa: PLC0415  (the loader itself does not need torch)

    return torch.allclose(loss, loss_ref, rtol=1e-12, atol=0.0) and \
        all(torch.allclose(a, b, rtol=1e-10, atol=1e-14) for a, b in zip(grads, grads_ref, strict=True))


_SUFFIXES = {"torch.float32": "f32", "torch.float64": "f64"}


def per_type(signatures: dict[str, list]) -> dict[str, tuple]:
    """The ctypes table of a kernel written once per type: each ``NAME`` of ``signatures``
    (name -> argtypes) as ``NAME_f32`` and ``NAME_f64``, both returning an int."""
    return {f"{name}_{suffix}": (ctypes.c_int, args) for name, args in signatures.items()
            for suffix in _SUFFIXES.values()}


def for_dtype(fns: SimpleNamespace, dtype) -> SimpleNamespace:
    """The functions of a loaded kernel (``NAME_f32`` for torch.float32, ``NAME_f64`` for
    torch.float64) under their names without the suffix, called with tensors (each passed as the
    address of its first element, a view's included), None (a null pointer) and integers.  A
    function that returns non-zero found no memory for a scratch block: MemoryError."""
    suffix = _SUFFIXES[str(dtype)]
    bound = getattr(fns, "_typed_" + suffix, None)
    if bound is None:
        names = [n[:-len(suffix) - 1] for n in vars(fns) if n.endswith("_" + suffix) and not n.startswith("_")]
        bound = SimpleNamespace(**{n: _with_tensors(getattr(fns, f"{n}_{suffix}"), n) for n in names})
        setattr(fns, "_typed_" + suffix, bound)
    return bound


def _with_tensors(fn, name: str):
    import torch  # noqa: PLC0415  (the loader itself does not need torch)

    def call(*args):
        if fn(*[a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]) != 0:
            raise MemoryError(f"the kernel function {name} found no memory for its scratch block")
    call.__name__ = name
    return call


class CompiledKernel:
    """The C source ``lib/<stem>.c``, compiled on first use and loaded with ctypes.

    Args:
        stem: the source's name without ``.c`` (also the prefix of the built library).
        functions: exported name -> (restype, argtypes) for ctypes.
        check: ``check(functions) -> bool``, the kernel against the torch path on a check case
            (on one thread and on several); False removes the build.
        fallback: what the caller does without the kernel, for the one warning.
    """

    def __init__(self, stem: str, functions: dict[str, tuple], check: Callable[[SimpleNamespace], bool],
                 fallback: str):
        self.stem = stem
        self.source = Path(__file__).with_name(stem + ".c")
        self.functions = functions
        self.check = check
        self.fallback = fallback
        self._lock = threading.Lock()
        self.state: dict = {}

    # -- what callers use
    def load(self) -> SimpleNamespace | None:
        """The bound functions (compiling the source if needed); None when no kernel can be had."""
        if "fns" in self.state:
            return self.state["fns"]
        with self._lock:
            if "fns" not in self.state:
                fns = None
                if kernel_enabled():
                    try:
                        fns = self._build_and_load()
                    except Exception as exc:  # noqa: BLE001 - any failure: the torch path, with a warning
                        self._warn(f"the kernel could not be built or loaded ({type(exc).__name__}: {exc})")
                self.state["fns"] = fns
            return self.state["fns"]

    def typed(self, dtype) -> SimpleNamespace | None:
        """The kernel's functions for ``dtype`` (:func:`for_dtype`; compiling the source if needed),
        None when no kernel can be had."""
        fns = self.load()
        return None if fns is None else for_dtype(fns, dtype)

    def available(self) -> bool:
        """True when the compiled kernel is used (compiles it on the first call)."""
        return self.load() is not None

    def path(self) -> Path | None:
        """Where the loaded library lives (None when the kernel is not in use)."""
        return self.state.get("path") if self.available() else None

    def reset(self) -> None:
        """Forget the loaded kernel: the next :meth:`load` builds or finds it again (tests)."""
        with self._lock:
            self.state.clear()

    # -- how
    def _warn(self, why: str) -> None:
        warnings.warn(f"lib.{self.stem}: {why}; {self.fallback}", RuntimeWarning, stacklevel=4)

    def _compile(self, cc: str, flags: list[str], target: Path) -> str | None:
        """Compile into ``target`` (and record its SHA-256 beside it); None on success, else the
        compiler's message.  OSError when the folder cannot be created or written."""
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            out = Path(tmp) / target.name
            cmd = [cc, *flags, "-fPIC", "-shared", str(self.source), "-o", str(out)]
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"{' '.join(cmd)}: {exc}"
            if res.returncode != 0:
                return f"{' '.join(cmd)}:\n{res.stderr.strip()}"
            digest = Path(tmp) / "digest"
            digest.write_text(_sha256(out) + "\n")
            os.replace(out, target)          # atomic: concurrent builders never see half a file
            os.replace(digest, _sidecar(target))
        return None

    def _build(self, cc: str, flags: list[str], name: str, errors: list[str]) -> Path | None:
        """A valid build of the source (found or made), or None with the reason in ``errors``."""
        target = cache_root() / name
        if _valid_build(target):
            return target
        try:
            err = self._compile(cc, flags, target)
        except OSError as exc:               # the cache folder cannot be created or written
            private = _private_folder()         # a note, not a fault: no warning for it alone
            target = private / name
            err = None if _valid_build(target) else self._compile(cc, flags, target)
        if err is not None:
            errors.append(err)
            return None
        return target

    def _build_and_load(self) -> SimpleNamespace | None:
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            self._warn("no C compiler (cc/gcc) on PATH")
            return None
        source = self.source.read_bytes()
        errors: list[str] = []
        for flags in _FLAG_SETS:
            key = hashlib.sha256(source + " ".join([cc, *flags]).encode() + _cpu_tag().encode()
                                 + platform.machine().encode()).hexdigest()[:16]
            name = f"{self.stem}-{key}.so"
            target = self._build(cc, flags, name, errors)
            if target is None:
                continue
            crash = _loads_in_a_child(target)
            if crash is not None:            # damaged although its checksum matches: rebuild once
                _remove(target)
                errors.append(crash)
                target = self._build(cc, flags, name, errors)
                if target is None or _loads_in_a_child(target) is not None:
                    continue
            try:
                lib = ctypes.CDLL(str(target))
            except OSError as exc:
                errors.append(f"loading {target}: {exc}")
                continue
            fns = SimpleNamespace()
            for fname, (restype, argtypes) in self.functions.items():
                fn = getattr(lib, fname)
                fn.restype, fn.argtypes = restype, argtypes
                setattr(fns, fname, fn)
            if not self.check(fns):
                errors.append(f"{target} does not reproduce the torch path on the check case; removed "
                              "(the next process rebuilds it)")
                _remove(target)
                continue
            self.state["path"] = target
            if errors:                           # a fault was met and worked around: say so
                warnings.warn(f"lib.{self.stem}: " + "\n".join(errors) + f"\nusing {target}", RuntimeWarning,
                              stacklevel=4)
            return fns
        self._warn("no usable kernel:\n" + "\n".join(errors))
        return None

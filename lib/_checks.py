"""Input validation shared by the library's public functions.

Every public function validates its arguments *before* doing any work and raises
``ValueError`` (or ``TypeError``) with a message that names the argument, the value
it received and the accepted range.  Nothing here is specific to one paper.
"""
from __future__ import annotations

import math
import os
from numbers import Integral, Real

import torch

DTYPE = torch.float64


def positive_int(name: str, value, minimum: int = 1) -> int:
    """Return ``value`` as an ``int`` after checking ``value >= minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def positive_real(name: str, value, *, upper: float | None = None, upper_name: str = "") -> float:
    """Return ``value`` as a float after checking ``0 < value`` (and ``value < upper``)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        else:
            raise TypeError(f"{name} must be a real number > 0, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite real number > 0, got {value}")
    if upper is not None and value >= upper:
        reason = f" ({upper_name})" if upper_name else ""
        raise ValueError(f"{name} must be < {upper}{reason}, got {value}")
    return value


def finite_real(name: str, value, *, minimum: float | None = None) -> float:
    """Return ``value`` as a float after checking it is a finite real number (and ``>= minimum``)."""
    bound = "" if minimum is None else f" >= {minimum:g}"
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number{bound}, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        raise ValueError(f"{name} must be a finite real number{bound}, got {value}")
    return value


def nonneg_real(name: str, value) -> float:
    """Return ``value`` as a float after checking it is finite and ``>= 0``."""
    return finite_real(name, value, minimum=0)


SEED_RANGE = (-(2**63), 2**64)


def seed_int(name: str, value) -> int:
    """Return a seed as an ``int`` after checking it is an integer that torch accepts.

    The one seed check of the library: Python and numpy integers (not bools, not floats) in
    [-2^63, 2^64), the range of ``torch.Generator.manual_seed``.  numpy integers are converted,
    since ``manual_seed`` itself rejects them.
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    value = int(value)
    if not SEED_RANGE[0] <= value < SEED_RANGE[1]:
        raise ValueError(f"{name} must be an integer in [-2^63, 2^64), got {value}")
    return value


def with_data(name: str, value: torch.Tensor) -> torch.Tensor:
    """``value`` itself when it holds data: a tensor on the ``meta`` device (shapes only, no
    numbers) is a ValueError naming the argument, before anything reads it."""
    if value.device.type == "meta":
        raise ValueError(f"{name} is a tensor on the meta device (a shape without numbers); pass a tensor with "
                         "data (on the CPU or a CUDA device)")
    return value


def int_list(name: str, value, minimum: int = 1, what: str = "integer") -> list[int]:
    """``value`` as a list of ints, each ``>= minimum``: a list, tuple or 1-D integer array or
    tensor.  A single int where the list is expected (``seeds=3`` for ``seeds=[3]``) is a
    TypeError naming the argument, never read as a count or iterated over."""
    if isinstance(value, (str, bytes, dict)) or isinstance(value, (Integral, Real)) or \
            (isinstance(value, torch.Tensor) and value.ndim != 1) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a list of {what}s (one a member), got {value!r}")
    out = []
    for v in value:
        if isinstance(v, torch.Tensor) and v.ndim == 0 and not v.is_floating_point():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, Integral):
            raise TypeError(f"{name} must be a list of {what}s (one a member), got the entry {v!r}")
        if v < minimum:
            raise ValueError(f"{name} must hold {what}s >= {minimum}, got {int(v)}")
        out.append(int(v))
    return out


def seed_list(name: str, value) -> list[int]:
    """A list of seeds (:func:`seed_int` each); a single int is a TypeError naming ``name``."""
    return [seed_int(f"{name} entry", s) for s in int_list(name, value, minimum=SEED_RANGE[0], what="seed")]


def as_tensor(name: str, value, ndim: int | tuple[int, ...], dtype=None) -> torch.Tensor:
    """Convert to a floating tensor and check its number of dimensions.

    ``dtype=None`` keeps a floating tensor's dtype (non-tensors and integer tensors become
    float64); an explicit ``dtype`` casts to it (models cast inputs to their own dtype).  A
    list, tuple or array becomes a tensor (the same numbers); a tensor on the meta device, an
    empty one, one with the wrong number of dimensions or with a NaN or infinite entry is an
    error naming ``name``.
    """
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.as_tensor(value, dtype=dtype or DTYPE)
        except Exception as exc:  # noqa: BLE001 - re-raised with context
            raise TypeError(f"{name} must be a tensor or array, got {type(value).__name__}") from exc
    with_data(name, value)
    if dtype is not None and value.dtype != dtype:
        if value.is_complex() and not dtype.is_complex:
            raise TypeError(f"{name} must be real ({dtype}), got a complex tensor ({value.dtype}); "
                            "its imaginary part would be dropped")
        value = value.to(dtype)
    elif not value.is_floating_point() and not value.is_complex():
        value = value.to(DTYPE)
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if value.ndim not in dims:
        want = " or ".join(str(d) for d in dims)
        raise ValueError(f"{name} must have {want} dimensions, got shape {tuple(value.shape)}")
    if value.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(value.shape)}): every dimension must be >= 1")
    if not torch.isfinite(value).all():
        raise ValueError(f"{name} contains NaN or infinite entries")
    return value


def sequence_pair(x, y, names: tuple[str, str] = ("x", "y")) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs x (N, T, n_x) and targets y (N, T, n_y) as tensors, checked to share N and T
    (``names``: what the caller calls them, for the messages)."""
    nx, ny = names
    x = as_tensor(nx, x, 3)
    y = as_tensor(ny, y, 3)
    if x.shape[:2] != y.shape[:2]:
        raise ValueError(f"{nx} (N, T, n_x) = {tuple(x.shape)} and {ny} (N, T, n_y) = {tuple(y.shape)} "
                         "must have the same N and T")
    return x, y


def same_dtype(**tensors) -> torch.dtype:
    """The common dtype of the named tensors; a TypeError naming them if they differ."""
    dtypes = {k: v.dtype for k, v in tensors.items()}
    if len(set(dtypes.values())) > 1:
        raise TypeError("these arguments must have the same dtype, got "
                        + ", ".join(f"{k}: {str(d).replace('torch.', '')}" for k, d in dtypes.items()))
    return next(iter(dtypes.values()))


def fits_in_memory(what: str, n_bytes: float, fraction: float = 0.5) -> None:
    """A MemoryError naming ``what`` when it needs more than ``fraction`` of the physical memory."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return
    if n_bytes > fraction * total:
        raise MemoryError(f"{what} needs {n_bytes / 2**30:.1f} GiB, more than {fraction:.0%} of this "
                          f"machine's {total / 2**30:.1f} GiB; choose a smaller size")


def float_dtype(name: str, dtype) -> torch.dtype:
    """``dtype`` itself when it is a real floating torch dtype (float16, bfloat16, float32,
    float64); a TypeError naming the argument otherwise (an integer dtype would truncate every
    draw and weight to an integer, a complex one would change the model)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a real floating torch dtype (torch.float32 or torch.float64), "
                        f"got {dtype!r}")
    return dtype


def torch_device(name: str, device) -> torch.device:
    """``device`` as a ``torch.device``; a ValueError naming the argument for a string torch does not know."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise TypeError(f"{name} must be a torch.device or a string such as 'cpu' or 'cuda', got {device!r}")
    try:
        return torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"{name} must name a torch device ('cpu', 'cuda', 'cuda:0', ...), got {device!r}") from exc


def finite(name: str, value: torch.Tensor) -> torch.Tensor:
    """``value`` itself when every entry is finite; a ValueError naming it otherwise (also for a
    tensor on the meta device, which has no entries to check)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(value).__name__}")
    with_data(name, value)
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return value


def model_dtype_device(model) -> tuple[torch.dtype, torch.device]:
    """The one dtype and device of a model's parameters (a TypeError if they are mixed or if
    there are none, or if the dtype is not floating point)."""
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    if not params:
        raise TypeError(f"model must be a torch.nn.Module with parameters, got {type(model).__name__}")
    kinds = {(p.dtype, p.device) for p in params}
    if len(kinds) > 1:
        raise TypeError("model parameters must share one dtype and device, got "
                        + ", ".join(sorted(f"{str(d).replace('torch.', '')} on {v}" for d, v in kinds)))
    dtype, device = kinds.pop()
    if not dtype.is_floating_point:
        raise TypeError(f"model parameters must be floating point, got {dtype}")
    return dtype, device


def data_matches_model(model, **tensors) -> None:
    """Every named tensor has the model's parameter dtype and device; a TypeError naming both
    sides otherwise (the training would otherwise run in a mixed precision nobody asked for)."""
    dtype, device = model_dtype_device(model)
    for name, t in tensors.items():
        if t.dtype != dtype:
            raise TypeError(f"{name} is {str(t.dtype).replace('torch.', '')} but the model's parameters are "
                            f"{str(dtype).replace('torch.', '')}; convert one of them (e.g. {name}.to(torch."
                            f"{str(dtype).replace('torch.', '')}) or model.to({t.dtype}))")
        if t.device != device:
            raise TypeError(f"{name} is on {t.device} but the model's parameters are on {device}")


def check_output(what: str, out: torch.Tensor, target: torch.Tensor, target_name: str) -> None:
    """The model's output and its target have one shape: no broadcasting into another objective."""
    if tuple(out.shape) != tuple(target.shape):
        raise ValueError(f"{what} has shape {tuple(out.shape)} but {target_name} has shape "
                         f"{tuple(target.shape)}: they must be equal (a broadcast would train another "
                         "objective)")


def finite_output(y: torch.Tensor, x: torch.Tensor, model, why: str = "") -> torch.Tensor:
    """``y`` when it is finite; otherwise a ValueError naming the non-finite parameter of ``model``
    or, when every parameter is finite, x (checked finite before: the output overflowed; ``why``
    says how)."""
    if not bool(torch.isfinite(y).all()):
        for name, p in model.named_parameters():
            if not bool(torch.isfinite(p).all()):
                raise ValueError(f"{type(model).__name__} parameter {name} contains NaN or infinite entries")
        big = float(torch.as_tensor(x).detach().abs().max())
        raise ValueError(f"the output of {type(model).__name__} overflows {y.dtype} (inf or NaN) for finite "
                         f"inputs x (largest |x| = {big:.3g}){why}")
    return y

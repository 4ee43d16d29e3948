"""What the tests share: the relative error every numerical comparison of the suite is read in."""
import torch


def rel_err(a, b) -> float:
    """||a - b|| / ||b|| (Frobenius), computed in double precision on the CPU whatever the inputs'
    dtype and device (a float32 result is compared with its float64 reference as it is; complex
    inputs in complex128); a zero ``b`` counts as 1e-300, so that two zeros agree and anything
    else against zero does not."""
    a, b = _double(a), _double(b)
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b).clamp_min(1e-300))


def _double(t) -> torch.Tensor:
    t = torch.as_tensor(t).detach().cpu()
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def stop_at(step: int):
    """An ``on_log`` callback of lib.train_online that interrupts the run (KeyboardInterrupt) at
    the log point after update ``step``, as a killed process would stop it."""
    def on_log(now, losses):
        if now == step:
            raise KeyboardInterrupt
    return on_log


def fault_rows():
    """``(rows, row)`` for a fault-injection table: ``@row("what is injected: what must hold")``
    on a function appends ``(name, function)`` to ``rows`` (the table's order is the file's)."""
    rows = []

    def row(name: str):
        def add(fn):
            rows.append((name, fn))
            return fn
        return add
    return rows, row

"""Run every benchmarks/bench_*.py and print one table of speed ratios.

    python benchmarks/run.py [--quick]        (or: make bench)

Each ``bench_<subject>.py`` exposes ``run(quick: bool = False) -> list[dict]`` with keys
name, reference_s, fast_s, ratio, max_rel_err, target_ratio.  The exit status is non-zero if
any ratio misses its target or any fast path disagrees with its reference by more than 1e-10
(relative).  Ratios, not absolute times, are the result: both sides run in the same process.
"""
from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXACT_TOL = 1e-10


def discover(folder: Path = HERE) -> list[Path]:
    """Every bench_*.py in ``folder``, sorted by name."""
    return sorted(folder.glob("bench_*.py"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "run", None)):
        raise TypeError(f"{path.name} must define run(quick: bool = False) -> list[dict]")
    return module


def alternating_rounds(ref, fast, rounds: int, block: int = 3, timer=time.perf_counter) -> tuple[list, list]:
    """Per-round best single-call times (s) of ``ref`` and ``fast``, measured in alternating blocks.

    On a shared (virtual) machine the speed drifts by up to 2x over seconds, so two separate
    best-of series can see two different machines; alternating ``rounds`` times between a
    block of ``block`` calls of each exposes both to the same drift.  Within a block the
    calls run back to back, as in a training loop (a single call right after the other
    method would find its data evicted from cache).  Both get the same number of samples;
    each is called once first (warm-up; the first call of a compiled kernel loads it).
    Returns two lists of ``rounds`` times, the best call of each block: round i of ``ref``
    and of ``fast`` ran next to each other, so their ratio is one sample of the speed-up, and
    the spread of those samples shows how far one run can be trusted.
    ``timer``: wall clock by default; ``time.thread_time`` (the calling thread's CPU time) for
    single-thread work on a machine that other processes share, whose waits it leaves out."""
    ref(), fast()
    best = ([], [])
    for _ in range(rounds):
        for which, fn in enumerate((ref, fast)):
            b = float("inf")
            for _ in range(block):
                t0 = timer()
                fn()
                b = min(b, timer() - t0)
            best[which].append(b)
    return best


def alternating_best(ref, fast, rounds: int, block: int = 3, timer=time.perf_counter) -> tuple[float, float]:
    """Best single-call times (s) of ``ref`` and ``fast`` over all the blocks of
    :func:`alternating_rounds` (same arguments)."""
    t_ref, t_fast = alternating_rounds(ref, fast, rounds, block, timer)
    return min(t_ref), min(t_fast)


def alternating_ratio(ref, fast, rounds: int, block: int = 3, timer=time.perf_counter) -> tuple[float, float, list]:
    """:func:`alternating_best`'s two times and the ratio of each round (ref over fast), the
    ``round_ratios`` of a benchmark row (same arguments as :func:`alternating_rounds`)."""
    t_ref, t_fast = alternating_rounds(ref, fast, rounds, block, timer)
    return min(t_ref), min(t_fast), [a / b for a, b in zip(t_ref, t_fast)]


def straddles(row: dict) -> bool:
    """The row's rounds (``round_ratios``) fall on both sides of its target."""
    rr, target = row.get("round_ratios"), row.get("target_ratio")
    return bool(rr) and target is not None and min(rr) < target <= max(rr)


def target_reading(row: dict) -> str:
    """Whether a row meets its target: its ratio (best call against best call, the estimate least
    disturbed by the machine's drift) against the target, "met" or "not met".  A row that kept
    its rounds apart (``round_ratios``, the ratio of each round of :func:`alternating_rounds`)
    adds where those samples fall on both sides of the target: then one run cannot settle it."""
    verdict = "met" if row["ratio"] >= row["target_ratio"] else "not met"
    if straddles(row):
        verdict += " by the best calls; the rounds' ratios fall on both sides of the target"
    return verdict


def run_all(quick: bool = False, only: list[str] | None = None) -> list[dict]:
    """Rows of every benchmark (or of the subjects in ``only``, e.g. ["linear_rnn"]), each
    with an added ``bench`` key (the file's subject) and ``ok`` (ratio >= target and
    max_rel_err <= 1e-10)."""
    paths = discover()
    if only:
        known = {p.stem.removeprefix("bench_"): p for p in paths}
        unknown = [o for o in only if o not in known]
        if unknown:
            raise SystemExit(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(known)}")
        paths = [known[o] for o in only]
    rows = []
    for path in paths:
        for row in load(path).run(quick=quick):
            row = dict(row, bench=path.stem.removeprefix("bench_"))
            target = row["target_ratio"]          # None: an informational row (no target)
            row["ok"] = bool((target is None or row["ratio"] >= target) and row["max_rel_err"] <= EXACT_TOL)
            rows.append(row)
    return rows


def format_table(rows: list[dict]) -> str:
    head = f"{'benchmark':<44} {'reference s':>12} {'fast s':>10} {'ratio':>8} {'target':>7} {'max rel err':>12}  ok"
    lines = [head, "-" * len(head)]
    for r in rows:
        target = r["target_ratio"]
        ok = r.get("ok", (target is None or r["ratio"] >= target) and r["max_rel_err"] <= EXACT_TOL)
        lines.append(f"{r['name']:<44} {r['reference_s']:>12.4f} {r['fast_s']:>10.4f} "
                     f"{r['ratio']:>7.1f}x {'—' if target is None else f'{target:g}x':>7} {r['max_rel_err']:>12.2e}  "
                     f"{'info' if target is None else 'yes' if ok else 'NO'}{straddles(r) * ' (rounds on both sides)'}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``run.py [--quick] [SUBJECT ...]``: SUBJECT is a file's name without ``bench_``/``.py``.
    ``-h``/``--help`` prints this usage and the subjects; any other option is refused before a
    benchmark runs."""
    subjects = ", ".join(p.stem.removeprefix("bench_") for p in discover())
    if "-h" in argv or "--help" in argv:
        print(f"usage: python -m benchmarks.run [--quick] [SUBJECT ...]\n  --quick  fewer repeats (a smoke run)\n"
              f"  SUBJECT  one of: {subjects} (default: all)")
        return 0
    unknown = [a for a in argv if a.startswith("-") and a != "--quick"]
    if unknown:
        print(f"benchmarks.run: unknown option(s) {', '.join(unknown)}; accepted: --quick, -h/--help, "
              f"and subjects ({subjects})", file=sys.stderr)
        return 2
    quick = "--quick" in argv
    rows = run_all(quick=quick, only=[a for a in argv if not a.startswith("-")])
    print(format_table(rows), flush=True)
    print(conditions(), flush=True)
    missed = [r["name"] for r in rows if not r["ok"]]
    if missed:
        print("target missed:", "; ".join(missed), file=sys.stderr)
        return 1
    return 0


def conditions() -> str:
    """What the ratios depend on besides the code: threads and the machine's load, as measured."""
    import os

    import torch

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    busy = load is not None and load[0] > 0.5 * (os.cpu_count() or 1)
    return (f"torch threads: {torch.get_num_threads()}; CPUs: {os.cpu_count()}; load average "
            f"{'unknown' if load is None else ', '.join(f'{x:.1f}' for x in load)} (1, 5, 15 min).\n"
            "The ratios depend on the number of threads and on the machine's load: the fast paths stream "
            "memory and the references are compute-bound, so other work on the machine changes them unequally."
            + ("\nThis machine is busy: a NO above may be the load, not the code; run again on an idle machine."
               if busy else ""))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

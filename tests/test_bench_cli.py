"""The benchmark runner's command line: ``--help`` and a mistyped option answer at once, before any
benchmark runs (a full run takes minutes)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "benchmarks.run", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_help_lists_the_subjects_and_runs_nothing():
    res = _run("--help")
    assert res.returncode == 0, res.stderr
    subjects = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py"))
    assert subjects and all(s in res.stdout for s in subjects), res.stdout
    assert "reference s" not in res.stdout           # the table header of a run that measured something


def test_unknown_option_is_refused_by_name():
    res = _run("--quik", "gated")
    assert res.returncode == 2
    assert "--quik" in res.stderr and "--quick" in res.stderr, res.stderr
    assert "reference s" not in res.stdout


def test_unknown_subject_is_refused_with_the_list():
    res = _run("--quick", "nosuch")
    assert res.returncode != 0
    assert "nosuch" in res.stderr and "online_step" in res.stderr, res.stderr


def test_alternating_rounds_keeps_each_rounds_best_and_alternates():
    """run.alternating_rounds: blocks of calls alternate ref, fast, ref, fast ...; each round reports
    the best call of its block; alternating_best is the best over all blocks."""
    from benchmarks import run

    clock, calls = [0.0], []
    durations = {"ref": iter([9, 5, 4, 6, 7, 3, 2, 8, 9, 1, 5, 5, 5, 5]),    # warm-up first, then 3 rounds x 2
                 "fast": iter([9, 2, 3, 1, 4, 4, 4, 2, 1, 3, 5, 5, 5, 5])}

    def timed(name):
        def call():
            calls.append(name)
            clock[0] += next(durations[name])
        return call

    t_ref, t_fast = run.alternating_rounds(timed("ref"), timed("fast"), rounds=3, block=2, timer=lambda: clock[0])
    assert calls == ["ref", "fast"] + ["ref", "ref", "fast", "fast"] * 3
    assert t_ref == [4, 6, 2] and t_fast == [2, 1, 4]
    clock[0], calls[:] = 0.0, []
    durations = {"ref": iter([9, 5, 4, 6, 7, 3, 2, 8, 9, 1]), "fast": iter([9, 2, 3, 1, 4, 4, 4, 2, 1, 3])}
    assert run.alternating_best(timed("ref"), timed("fast"), rounds=3, block=2, timer=lambda: clock[0]) == (2, 1)
    durations = {"ref": iter([9, 5, 4, 6, 7, 3, 2, 8, 9, 1]), "fast": iter([9, 2, 3, 1, 4, 4, 4, 2, 1, 3])}
    assert run.alternating_ratio(timed("ref"), timed("fast"), rounds=3, block=2,
                                 timer=lambda: clock[0]) == (2, 1, [4 / 2, 6 / 1, 2 / 4])


def test_target_reading_adds_the_spread_of_the_rounds():
    """run.target_reading: the best calls' ratio decides; where the rounds' ratios fall on both
    sides of the target, the reading says so."""
    from benchmarks import run

    row = {"target_ratio": 1.5, "ratio": 1.51}
    assert run.target_reading(dict(row, round_ratios=[1.52, 1.6, 1.55])) == "met"
    assert run.target_reading(dict(row, ratio=1.47, round_ratios=[1.4, 1.49, 1.45])) == "not met"
    straddling = dict(row, round_ratios=[1.48, 1.53])
    assert run.straddles(straddling) and not run.straddles(row)
    assert run.target_reading(straddling).startswith("met by the best calls; the rounds' ratios fall on both sides")
    assert run.target_reading(dict(straddling, ratio=1.49)).startswith("not met by the best calls")
    assert run.target_reading(row) == "met" and run.target_reading(dict(row, ratio=1.49)) == "not met"

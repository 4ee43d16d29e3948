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

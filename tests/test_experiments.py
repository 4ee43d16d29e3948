"""The experiment registry (lib.book.experiments) and the architecture registry (lib.architectures):
one declared source that the chapters, the runner and the loader derive from."""
import re

import pytest
import torch

from lib import architectures
from lib.book import experiments as ex
from tools import book


def test_choose_takes_the_scale_column_and_an_explicit_value_wins():
    exp = ex.Experiment("_t", dict(steps=ex.Setting(10, 1000, "x"), lr=ex.Setting(1e-2, 1e-3, "y")))
    assert exp.choose("book", steps=None, lr=None) == (10, 1e-2)
    assert exp.choose("paper", steps=None, lr=None) == (1000, 1e-3)
    assert exp.choose("paper", steps=7, lr=None) == (7, 1e-3)
    flags = ex.Experiment("_f", dict(flag=ex.Setting(True, True, "z")))
    assert flags.choose("book", flag=False) is False           # only None means "take the column"
    assert exp.argued("paper", "steps") == {"steps": 1000}


@pytest.mark.parametrize("scale", ["Book", "full", "", None, 1])
def test_an_unknown_scale_is_named(scale):
    exp = ex.Experiment("_t", dict(n=ex.Setting(1, 2, "x")))
    with pytest.raises(ValueError, match=r"scale must be 'book' or 'paper'"):
        exp.choose(scale, n=None)


def test_choose_needs_exactly_the_declared_settings():
    exp = ex.Experiment("_t", dict(a=ex.fixed(1, "x"), b=ex.fixed(2, "y")))
    with pytest.raises(ValueError, match="missing: b"):
        exp.choose("book", a=None)
    with pytest.raises(ValueError, match="not declared: c"):
        exp.choose("book", a=None, b=None, c=3)
    with pytest.raises(KeyError, match="declares no setting 'c'"):
        exp.argued("book", "c")


def _parameters(src):
    text = src.read_text()
    cell = text.split(":tags: [parameters]", 1)[1].split("```", 1)[0]
    return dict(re.findall(r"^(\w+): [^=]+= (.+?)(?:\s+#.*)?$", cell, flags=re.M))


@pytest.mark.parametrize("src", book.chapters(), ids=lambda p: p.stem)
def test_every_declared_setting_is_a_parameter_left_at_none(src):
    """A chapter's parameters cell declares every setting of its experiment, at None (the value
    comes from the registry), and its choose() call passes them all."""
    exp = ex.EXPERIMENTS.get(src.stem)
    if exp is None:
        assert src.stem[0] == "9", f"{src.stem} has no declared experiment"
        return
    params = _parameters(src)
    for name in exp.settings:
        assert params.get(name) == "None", f"{src.stem}: parameter {name} must default to None"
    if exp.settings:
        assert f'experiment("{src.stem}")' in src.read_text()


def test_no_chapter_restates_a_scale_column():
    for src in book.chapters():
        assert not re.search(r'\}\[scale\]', src.read_text()), src.stem


def test_runs_take_the_paper_column_of_their_chapter():
    exp, spec = ex.run_of("teacher")
    cfg = spec.config(exp)
    assert cfg["steps"] == exp.settings["steps"].paper == 781_250
    assert cfg["d"] == 4 and cfg["T"] == 32 and cfg["teacher_seeds"] == [101, 102, 103]
    exp12, icl_width = ex.run_of("icl_width")
    assert exp12.settings["sweep_hidden"].paper == icl_width.widths + [exp12.settings["n_hidden"].paper]
    exp11, tw = ex.run_of("teacher_width")
    assert exp11.settings["fig3a_hidden"].paper == tw.widths


def test_every_run_and_stored_chapter_is_declared_once():
    assert sorted(ex.RUNS) == ["arch_icl", "arch_teacher", "icl", "icl_width", "teacher", "teacher_init", "teacher_protocol",
                             "teacher_width", "teacher_width_seeds"]
    assert [e.chapter[:2] for e in ex.stored_chapters()] == ["04", "05", "06"]


@pytest.mark.parametrize("kind, layers", [(k, n) for k, a in architectures.ARCHITECTURES.items() for n in a.layers])
def test_every_architecture_builds_and_is_named(kind, layers):
    stack = architectures.build(kind, layers, 3, [4, 5], 2, [0, 1], dtype=torch.float64)
    x = torch.randn(2, 3, 6, 3, dtype=torch.float64)
    assert stack(x).shape == (2, 3, 6, 2) and stack.K == 2
    assert architectures.label(kind, layers).startswith(architectures.ARCHITECTURES[kind].name)


def test_architecture_errors_name_the_argument():
    with pytest.raises(ValueError, match="kind must be one of"):
        architectures.build("transformer", 1, 3, [4], 2, [0])
    with pytest.raises(ValueError, match="layers"):
        architectures.build("gated", 2, 3, [4], 2, [0])
    with pytest.raises(ValueError, match="widths and seeds"):
        architectures.build("lstm", 1, 3, [4, 5], 2, [0])


def test_import_lib_needs_no_notebook_stack():
    """The science imports without IPython, matplotlib or the book's machinery."""
    import os
    import subprocess
    import sys

    root = book.ROOT
    code = ("import sys, lib\n"
            "loaded = {'IPython', 'matplotlib', 'lib.book', 'myst_nb'} & set(sys.modules)\n"
            "assert not loaded, loaded")
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr

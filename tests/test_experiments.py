"""The experiment registry (lib.book.experiments) and the architecture registry (lib.architectures):
one declared source that the chapters, the runner and the loader derive from."""
import re

import pytest
import torch

from lib import architectures
from lib.book import experiments as ex
from tools import book


def test_value_and_argued_take_the_scale_column():
    exp = ex.Experiment("_t", dict(steps=ex.Setting(10, 1000, "x"), lr=ex.Setting(1e-2, 1e-3, "y")))
    assert (exp.value("steps", "book"), exp.value("lr", "paper")) == (10, 1e-3)
    assert exp.argued("paper", "steps") == {"steps": 1000}


def test_fill_takes_the_scale_column_keeps_a_set_value_and_says_which(capsys):
    exp = ex.Experiment("_t", dict(steps=ex.Setting(10, 1000, "App. B.1"), lr=ex.Setting(1e-2, 1e-3, "peak"),
                                   d=ex.fixed(4, "§3")), source="book/experiments/t.toml")
    ns = dict(steps=None, lr=3e-3, d=None, other=None)
    exp.fill("paper", ns)
    assert ns == dict(steps=1000, lr=3e-3, d=4, other=None)         # only declared settings are filled
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "The settings of this execution (scale='paper'), as book/experiments/t.toml declares them:"
    assert out[1:] == ["  steps = 1000 (paper; book: 10) -- App. B.1",
                       "  lr = 0.003 (set for this execution; paper: 0.001) -- peak",
                       "  d = 4 (both scales) -- §3"]
    flags = ex.Experiment("_f", dict(flag=ex.Setting(True, True, "z")))
    ns = dict(flag=False)
    flags.fill("book", ns)
    assert ns["flag"] is False                                      # only None means "take the column"


@pytest.mark.parametrize("scale", ["Book", "full", "", None, 1])
def test_fill_names_an_unknown_scale_before_filling_anything(scale):
    exp = ex.Experiment("_t", dict(n=ex.Setting(1, 2, "x")))
    ns = dict(n=None)
    with pytest.raises(ValueError, match=r"scale must be 'book' or 'paper'"):
        exp.fill(scale, ns)
    assert ns == dict(n=None)


def test_fill_needs_every_declared_setting_as_a_parameter():
    exp = ex.Experiment("_t", dict(a=ex.fixed(1, "x"), b=ex.fixed(2, "y")), source="book/experiments/t.toml")
    ns = dict(a=None)
    with pytest.raises(ValueError, match=r"_t declares b in book/experiments/t.toml, but its parameters cell does not"):
        exp.fill("book", ns)
    assert ns == dict(a=None)


def test_the_registry_is_read_on_first_use_not_at_import():
    """Importing the registry's module reads no file of the book (the science and the tools import
    it where no book is); the first use reads book/experiments."""
    import os
    import subprocess
    import sys

    code = ("import builtins, io, pathlib, sys\n"
            "opened = []\n"
            "real = pathlib.Path.read_text\n"
            "pathlib.Path.read_text = lambda self, *a, **k: (opened.append(str(self)), real(self, *a, **k))[1]\n"
            "from lib.book import experiments as ex\n"
            "assert not [p for p in opened if 'experiments' in p], opened\n"
            "assert ex.experiment('11_learning_attention_teacher').settings\n"
            "assert [p for p in opened if p.endswith('zucchet.toml')], opened\n")
    env = dict(os.environ, PYTHONPATH=str(book.ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], cwd=book.ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_argued_needs_a_declared_setting():
    exp = ex.Experiment("_t", dict(a=ex.fixed(1, "x"), b=ex.fixed(2, "y")))
    with pytest.raises(KeyError, match="declares no setting 'c'"):
        exp.argued("book", "c")


def _parameters(src):
    text = src.read_text()
    cell = text.split(":tags: [parameters]", 1)[1].split("```", 1)[0]
    return dict(re.findall(r"^(\w+): [^=]+= (.+?)(?:\s+#.*)?$", cell, flags=re.M))


@pytest.mark.parametrize("src", book.chapters(), ids=lambda p: p.stem)
def test_every_declared_setting_is_a_parameter_left_at_none(src):
    """A chapter's parameters cell declares every setting of its experiment, at None (the value
    comes from the registry), and the cell after it fills them (exp.fill)."""
    exp = ex.EXPERIMENTS.get(src.stem)
    if exp is None:
        assert src.stem[0] == "9", f"{src.stem} has no declared experiment"
        return
    params = _parameters(src)
    for name in exp.settings:
        assert params.get(name) == "None", f"{src.stem}: parameter {name} must default to None"
    if exp.settings:
        text = src.read_text()
        assert f'experiment("{src.stem}")' in text and re.search(r"^exp\.fill\(scale, globals\(\)\)$", text, re.M)


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

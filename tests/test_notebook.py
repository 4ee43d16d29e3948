"""Tests of lib.book.notebook (the chapters' scale switch, agreement measure and stored runs) and of
lib.sequence_memory.random_sequences (the random sequence sets of Chapters 8 and 9)."""
import math

import pytest
import torch

from lib.book.notebook import check_scale, rel_err
from lib.sequence_memory import random_sequences


def test_rel_err_is_the_frobenius_ratio():
    a = torch.tensor([[3.0, 0.0], [0.0, 4.0]], dtype=torch.float64)
    b = torch.zeros(2, 2, dtype=torch.float64)
    b[0, 0] = 1.0
    # ||a - b|| = sqrt(2^2 + 4^2), ||b|| = 1
    assert rel_err(a, b) == pytest.approx(math.sqrt(20.0), rel=1e-15)
    assert rel_err(b, b) == 0.0
    # it is not symmetric: the denominator is the second argument
    assert rel_err(b, a) == pytest.approx(math.sqrt(20.0) / 5.0, rel=1e-15)
    assert isinstance(rel_err([1.0, 2.0], [1.0, 2.5]), float)


def test_rel_err_refuses_shapes_that_would_broadcast():
    with pytest.raises(ValueError, match=r"rel_err needs a and b of one shape, got \(1, 3\) and \(3,\)"):
        rel_err(torch.ones(1, 3), torch.ones(3))


def test_random_sequences_lengths_items_and_determinism():
    seqs = random_sequences(50, 9, 3, torch.Generator().manual_seed(4))
    lengths = [s.shape[0] for s in seqs]
    assert len(seqs) == 50 and lengths[0] == 9
    assert min(lengths) >= 1 and max(lengths) == 9 and len(set(lengths)) > 3
    assert all(s.shape[1] == 3 and s.dtype == torch.float64 for s in seqs)
    again = random_sequences(50, 9, 3, torch.Generator().manual_seed(4))
    assert all(torch.equal(s, t) for s, t in zip(seqs, again))
    other = random_sequences(50, 9, 3, torch.Generator().manual_seed(5))
    assert not all(s.shape == t.shape and torch.equal(s, t) for s, t in zip(seqs, other))
    # lengths are drawn before the items, from the same generator
    g = torch.Generator().manual_seed(4)
    drawn = [int(v) for v in torch.randint(1, 10, (50,), generator=g)]
    assert lengths[1:] == drawn[1:]
    assert torch.equal(seqs[0], torch.randn(9, 3, generator=g, dtype=torch.float64))


@pytest.mark.parametrize("kw, match", [
    (dict(n=0, max_len=5, a=2), "n must be an integer >= 1"),
    (dict(n=3, max_len=0, a=2), "max_len must be an integer >= 1"),
    (dict(n=3, max_len=5, a=-1), "a must be an integer >= 1"),
])
def test_random_sequences_rejects_bad_sizes(kw, match):
    with pytest.raises(ValueError, match=match):
        random_sequences(generator=torch.Generator(), **kw)


def test_random_sequences_needs_a_generator():
    with pytest.raises(TypeError, match="generator must be a torch.Generator, got int"):
        random_sequences(3, 5, 2, 0)


def test_stored_chapter_run_reads_the_run_at_book_scale_only_and_says_where_it_came_from(monkeypatch, capsys):
    from lib.book import artefacts, notebook
    calls, shown = [], []
    meta = dict(command="python tools/paper.py chapter 05", finished_utc="2026-11-20 10:00 UTC", wall_seconds=1860.0,
                device="cpu (CPU: AMD EPYC)", git_commit="0123456789abcdef", versions={"torch": "2.13.0"},
                parameters={"scale": "paper"})
    run = {"meta": meta, "glued": {}}
    monkeypatch.setattr(artefacts, "load_chapter_run", lambda name: calls.append(name) or run)
    monkeypatch.setattr(notebook, "display", lambda obj: shown.append(obj.data))
    assert notebook.stored_chapter_run("05_memory_and_delay", "book") is run
    assert shown == ["Stored run: `python tools/paper.py chapter 05`, finished 2026-11-20 10:00 UTC after 31 min on "
                     "cpu (CPU: AMD EPYC) (commit `0123456789`, torch 2.13.0); parameters {'scale': 'paper'}."]
    assert notebook.stored_chapter_run("05_memory_and_delay", "paper") is None
    assert "being produced by this run" in capsys.readouterr().out
    assert calls == ["05_memory_and_delay"]
    with pytest.raises(ValueError, match="scale must be 'book' or 'paper'"):
        notebook.stored_chapter_run("05_memory_and_delay", "full")


def test_a_missing_stored_run_fails_the_chapter_unless_the_reader_asked_for_the_book_scale_only(monkeypatch):
    """A missing stored run is an error naming the command that writes it and the book_only switch;
    with book_only=True nothing is read and the page says so; a bad checksum is an error either way
    it is read."""
    from lib.book import artefacts, notebook
    shown, calls = [], []
    monkeypatch.setattr(notebook, "display", lambda obj: shown.append(obj.data))

    def absent(name):
        calls.append(name)
        raise FileNotFoundError(f"no stored run for {name}; make paper EXP=ch05")
    monkeypatch.setattr(artefacts, "load_chapter_run", absent)
    with pytest.raises(FileNotFoundError, match=r"make paper EXP=ch05.*-p book_only True"):
        notebook.stored_chapter_run("05_memory_and_delay", "book")
    assert shown == []
    assert notebook.stored_chapter_run("05_memory_and_delay", "book", book_only=True) is None
    assert calls == ["05_memory_and_delay"]                      # book_only: not even looked for
    assert len(shown) == 1 and "book_only=True" in shown[0] and "not read" in shown[0]
    with pytest.raises(TypeError, match="book_only"):
        notebook.stored_chapter_run("05_memory_and_delay", "book", book_only="yes")

    def corrupt(name):
        raise ValueError("checksum mismatch for results/ch05/glued.json")
    monkeypatch.setattr(artefacts, "load_chapter_run", corrupt)
    with pytest.raises(ValueError, match="checksum mismatch"):
        notebook.stored_chapter_run("05_memory_and_delay", "book")


def test_stored_chapter_run_reads_the_real_stored_runs():
    from lib.book import notebook
    for name in ("04_training_dynamics", "05_memory_and_delay", "06_s1_real_data"):
        run = notebook.stored_chapter_run(name, "book")
        assert run is not None and set(run) >= {"meta", "glued"}


def test_check_scale_returns_the_scale_or_names_both_values():
    assert check_scale("book") == "book" and check_scale("paper") == "paper"
    for bad in ("Book", "full", "", None):
        with pytest.raises(ValueError, match=r"scale must be 'book' or 'paper'"):
            check_scale(bad)

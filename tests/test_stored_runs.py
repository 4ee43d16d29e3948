"""Stored runs (lib.book.artefacts): what is read is what was written, for the run asked for.

A run is written here as ``tools/paper.py`` writes one (run.pt, meta.json, a manifest line each),
with the library alone, so that ``tests/test_mutants.py`` can run this module against a mutated
copy of ``lib/``; then each fault -- a changed, missing or swapped file, a manifest that does
not parse, members handed back in another order -- must give its error (or, for the order, the
members' own outputs).
"""
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from lib import architectures
from lib.book import artefacts, notebook

F64 = torch.float64


def _manifest(root: Path, files) -> None:
    """Add the SHA-256 of ``files`` to root/MANIFEST.sha256 (the format tools/common.py writes)."""
    path = root / "MANIFEST.sha256"
    lines = dict(reversed(line.split("  ", 1)) for line in path.read_text().splitlines()) if path.is_file() else {}
    for f in files:
        lines[Path(f).relative_to(root).as_posix()] = hashlib.sha256(Path(f).read_bytes()).hexdigest()
    path.write_text("".join(f"{d}  {r}\n" for r, d in sorted(lines.items())))


def _store(root: Path, name: str, widths=(2, 2), seeds=(0, 1), kind="gated"):
    """A stored run of one group: its trained (here: initial) stack is returned."""
    layers = 1
    model = architectures.build(kind, layers, 2, list(widths), 1, list(seeds), dtype=F64)
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    group = {"kind": kind, "layers": layers, "widths": list(widths), "seeds": list(seeds),
             "state": model.state_dict(), "history": {}, "seconds": 0.0}
    torch.save({"name": name, "task": {}, "groups": [group], "d_in": 2, "d_out": 1}, folder / "run.pt")
    (folder / "meta.json").write_text(json.dumps({"experiment": name, "config": {
        "groups": [{"kind": kind, "layers": layers, "widths": list(widths), "seeds": list(seeds)}]}}))
    _manifest(root, [folder / "run.pt", folder / "meta.json"])
    return model


def _store_chapter(root: Path, stem: str, glued: dict):
    folder = root / artefacts.chapter_folder(stem)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "glued.json").write_text(json.dumps(glued))
    (folder / "meta.json").write_text(json.dumps({"experiment": folder.name}))
    _manifest(root, [folder / "glued.json", folder / "meta.json"])


def _swap_folders(root: Path, a: str, b: str):
    """Exchange two runs' folders, and their manifest lines with them (checksums stay right)."""
    (root / a).rename(root / "_tmp")
    (root / b).rename(root / a)
    (root / "_tmp").rename(root / b)
    text = (root / "MANIFEST.sha256").read_text()
    text = text.replace(f"  {a}/", "  _tmp/").replace(f"  {b}/", f"  {a}/").replace("  _tmp/", f"  {b}/")
    (root / "MANIFEST.sha256").write_text(text)


def _other_run_pt(root: Path):
    """run.pt of a run of the same name with other groups, its manifest line updated."""
    _store(root / "_elsewhere", "alpha", widths=(3, 2))
    shutil.copy(root / "_elsewhere" / "alpha" / "run.pt", root / "alpha" / "run.pt")
    _manifest(root, [root / "alpha" / "run.pt"])


FAULTS = {
    # fault: (what is done to the stored run "alpha" (beside "beta", same groups), exception, words)
    "run.pt changed": (lambda r: (r / "alpha" / "run.pt").write_bytes((r / "alpha" / "run.pt").read_bytes() + b"x"),
                       ValueError, "checksum mismatch"),
    "meta.json changed": (lambda r: (r / "alpha" / "meta.json").write_text("{}"), ValueError, "checksum mismatch"),
    "run.pt missing": (lambda r: (r / "alpha" / "run.pt").unlink(), FileNotFoundError, "make paper EXP=alpha"),
    "meta.json not in the manifest": (
        lambda r: (r / "MANIFEST.sha256").write_text(
            "".join(line + "\n" for line in (r / "MANIFEST.sha256").read_text().splitlines()
                    if not line.endswith("alpha/meta.json"))), ValueError, "not listed"),
    "manifest missing": (lambda r: (r / "MANIFEST.sha256").unlink(), FileNotFoundError, "MANIFEST"),
    "manifest line malformed": (lambda r: (r / "MANIFEST.sha256").write_text("nonsense\n"), ValueError, "line 1"),
    "folders swapped with their manifest lines": (lambda r: _swap_folders(r, "alpha", "beta"), ValueError,
                                                  "belongs to the run"),
    "run.pt of another run of the name": (_other_run_pt, ValueError, "different runs"),
}


@pytest.fixture
def stored(tmp_path):
    root = tmp_path / "results"
    trained = _store(root, "alpha")
    _store(root, "beta")               # the same groups: only the names tell the two apart
    return root, trained


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_changed_missing_or_swapped_stored_run_is_refused(stored, fault):
    root, _ = stored
    assert artefacts.load_run("alpha", root)["groups"][0]["widths"] == [2, 2]   # intact, it loads
    do, exc, words = FAULTS[fault]
    do(root)
    with pytest.raises(exc, match=words):
        artefacts.load_run("alpha", root)


def test_members_come_back_in_their_order_with_their_weights(stored):
    """Member k of the loaded group computes what member k of the stored stack computed (the two
    members have one width, so only their weights tell them apart)."""
    root, trained = stored
    run = artefacts.load_run("alpha", root)
    x = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    members = run["groups"][0]["members"]
    assert len(members) == 2
    outs = [m(x) for m in members]
    assert not torch.allclose(outs[0], outs[1])
    for k, out in enumerate(outs):
        assert torch.allclose(out, trained.member(k)(x), rtol=1e-12, atol=0), k
    model = run["groups"][0]["model"]
    assert torch.allclose(model(x[None].expand(2, -1, -1, -1).contiguous())[1], outs[1], rtol=1e-12, atol=0)


def test_recurrent_members_come_back_in_their_order(tmp_path):
    root = tmp_path / "results"
    trained = _store(root, "gru_run", widths=(3, 3), seeds=(4, 5), kind="gru")
    members = artefacts.load_run("gru_run", root)["groups"][0]["members"]
    x = torch.randn(2, 3, 2, generator=torch.Generator().manual_seed(1), dtype=F64)
    for k, m in enumerate(members):
        assert torch.allclose(m(x), trained.member(k)(x), rtol=1e-12, atol=0), k


def test_a_missing_training_run_is_an_error_naming_its_command(stored):
    root, _ = stored
    (root / "alpha" / "run.pt").unlink()
    with pytest.raises(FileNotFoundError, match="make paper EXP=alpha"):
        artefacts.load_run("alpha", root)


@pytest.mark.parametrize("fault", ["glued changed", "meta names another run", "glued missing"])
def test_a_stored_chapter_execution_is_verified(tmp_path, fault):
    root = tmp_path / "results"
    _store_chapter(root, "04_x", {"a": 1})
    assert artefacts.load_chapter_run("04_x", root)["glued"] == {"a": 1}
    folder = root / "ch04_x"
    if fault == "glued changed":
        (folder / "glued.json").write_text(json.dumps({"a": 2}))
        exc, words = ValueError, "checksum mismatch"
    elif fault == "meta names another run":
        (folder / "meta.json").write_text(json.dumps({"experiment": "ch05_y"}))
        _manifest(root, [folder / "meta.json"])
        exc, words = ValueError, "moved between runs"
    else:
        (folder / "glued.json").unlink()
        exc, words = FileNotFoundError, "make paper EXP=ch04"
    with pytest.raises(exc, match=words):
        artefacts.load_chapter_run("04_x", root)


def test_a_missing_stored_chapter_execution_fails_the_chapter_unless_book_only(monkeypatch, tmp_path):
    monkeypatch.setattr(artefacts, "RESULTS", tmp_path)
    shown = []
    monkeypatch.setattr(notebook, "display", lambda obj: shown.append(obj.data))
    with pytest.raises(FileNotFoundError, match="book_only True"):
        notebook.stored_chapter_run("04_training_dynamics", "book")
    assert notebook.stored_chapter_run("04_training_dynamics", "book", book_only=True) is None
    assert "Book scale only" in shown[-1]


def test_a_stored_measurement_is_read_back_only_as_written(tmp_path):
    """results/NAME/bench.json (the CUDA step timed on a GPU): read back verified; changed, it is
    a checksum mismatch; missing, an error naming the command that writes it."""
    root = tmp_path / "results"
    (root / "bench_cuda").mkdir(parents=True)
    f = root / "bench_cuda" / "bench.json"
    f.write_text(json.dumps({"device": "a GPU", "rows": [{"name": "x", "ratio": 2.0}]}))
    _manifest(root, [f])
    assert artefacts.load_measurement("bench_cuda", root)["rows"][0]["ratio"] == 2.0
    f.write_text(json.dumps({"device": "a GPU", "rows": [{"name": "x", "ratio": 20.0}]}))
    with pytest.raises(ValueError, match="checksum mismatch"):
        artefacts.load_measurement("bench_cuda", root)
    f.unlink()
    with pytest.raises(FileNotFoundError, match="bench_cuda_step --json"):
        artefacts.load_measurement("bench_cuda", root)
    with pytest.raises(ValueError, match="name"):
        artefacts.load_measurement("../bench_cuda", root)


def test_a_run_is_called_the_papers_only_at_the_papers_steps():
    assert artefacts.at_steps({"steps": 300_000, "paper_steps": 300_000}) == "the paper's 300,000 steps"
    assert artefacts.at_steps({"steps": 299_999, "paper_steps": 300_000}) == "299,999 of the paper's 300,000 steps"


def test_a_run_names_every_device_and_commit_its_segments_record():
    # the top level of a joined run's meta holds its first segment's values only
    seg = lambda device, commit: {"device": device, "git_commit": commit}          # noqa: E731
    meta = {"device": "CPU: A", "git_commit": "c1",
            "group_segments": [[seg("CPU: A", "c1"), seg("CPU: B", "c2")], [seg("CPU: B", "c2")], [seg("CPU: A", "c1")]]}
    assert artefacts.recorded(meta, "device") == ["CPU: A", "CPU: B"]
    assert artefacts.recorded(meta, "git_commit") == ["c1", "c2"]
    assert artefacts.recorded({"device": "GPU", "git_commit": "c3"}, "device") == ["GPU"]
    # the stored runs: every device of every segment is named
    for name in ("arch_teacher", "teacher_width"):
        m = artefacts.load_run(name)["meta"]
        segs = [s for g in m["group_segments"] for s in g]
        assert set(artefacts.recorded(m, "device")) == {s["device"] for s in segs}

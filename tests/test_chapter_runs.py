"""Paper-scale chapter executions stored in results/: the checksum-verifying loader, the glue
extraction of tools/paper.py, and the stored artefacts of Chapters 4-6."""
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
from tools import paper
from tools.common import update_manifest

from lib.book.artefacts import (RESULTS, _JSONText, chapter_folder, jsonable,  # noqa: E402
                           load_chapter_run)

STEMS = {"04": "04_training_dynamics", "05": "05_memory_and_delay", "06": "06_s1_real_data"}
# what each chapter reads back from its stored run
KEYS = {"04": ("ch04-fig12", "ch04-fig4", "ch04-lr"), "05": ("ch05-fig3", "ch05-memory"),
        "06": ("ch06-data", "ch06-table1", "ch06-memory")}


def _store(root: Path, stem: str, glued: dict) -> Path:
    folder = root / chapter_folder(stem)
    folder.mkdir(parents=True)
    (folder / "glued.json").write_text(json.dumps(glued))
    (folder / "meta.json").write_text(json.dumps({"command": "python tools/paper.py chapter 04"}))
    update_manifest(root, [folder / "glued.json", folder / "meta.json"])
    return folder


def test_load_chapter_run_round_trip(tmp_path):
    _store(tmp_path, "04_training_dynamics", {"ch04-fig4": {"slope": -0.5, "widths": [10, 40]}})
    run = load_chapter_run("04_training_dynamics", root=tmp_path)
    assert run["glued"]["ch04-fig4"]["slope"] == -0.5
    assert run["meta"]["command"].startswith("python tools/paper.py chapter")


def test_checksum_mismatch_raises(tmp_path):
    folder = _store(tmp_path, "04_training_dynamics", {"ch04-fig4": {"slope": -0.5}})
    (folder / "glued.json").write_text(json.dumps({"ch04-fig4": {"slope": -0.4}}))   # a changed number
    with pytest.raises(ValueError, match="checksum mismatch"):
        load_chapter_run("04_training_dynamics", root=tmp_path)


def test_file_not_in_manifest_raises(tmp_path):
    folder = _store(tmp_path, "05_memory_and_delay", {"x": 1})
    (tmp_path / "MANIFEST.sha256").write_text("")
    with pytest.raises(ValueError, match="not listed"):
        load_chapter_run("05_memory_and_delay", root=tmp_path)
    assert folder.is_dir()


def test_missing_run_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="make paper EXP=ch06"):
        load_chapter_run("06_s1_real_data", root=tmp_path)
    _store(tmp_path, "04_training_dynamics", {"x": 1})           # a manifest, but not this chapter
    with pytest.raises(FileNotFoundError, match="make paper EXP=ch05"):
        load_chapter_run("05_memory_and_delay", root=tmp_path)


def test_glue_text_is_json_and_extracted(tmp_path):
    import numpy as np

    value = {"gaps": {10: np.array([0.5, 0.25])}, "ok": np.bool_(True), "nan": float("nan"), "n": np.int64(3)}
    text = repr(_JSONText(jsonable(value)))
    back = json.loads(text)
    assert back["gaps"]["10"] == [0.5, 0.25] and back["ok"] is True and back["n"] == 3 and back["nan"] != back["nan"]
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("glue")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"application/papermill.record/text/plain": text},
                               metadata={"scrapbook": {"name": "ch04-fig4", "mime_prefix": "application/papermill.record/"}}),
        nbformat.v4.new_output("display_data", data={"text/plain": "'not glued'"}),
    ]
    nb.cells = [cell]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    got = paper.glued_values(path)
    assert list(got) == ["ch04-fig4"] and got["ch04-fig4"]["gaps"]["10"] == [0.5, 0.25]


def test_jsonable_rejects_objects():
    with pytest.raises(TypeError):
        jsonable({"model": object()})


@pytest.mark.parametrize("number", sorted(STEMS))
def test_stored_chapter_runs(number):
    """The stored paper-scale executions verify, were made by the project's command at
    scale='paper', and hold what their chapter reads."""
    run = load_chapter_run(STEMS[number])
    meta = run["meta"]
    # the command as typed, or as `make paper EXP=chNN` passes it
    assert re.fullmatch(rf"python (tools/paper\.py|-m tools\.paper) chapter (ch)?{number}", meta["command"])
    assert meta["scale"] == "paper" and meta["parameters"] == {"scale": "paper"}
    for key in ("git_commit", "device", "versions", "wall_seconds", "finished_utc"):
        assert meta[key], key
    for key in KEYS[number]:
        assert key in run["glued"], key
    assert (RESULTS / chapter_folder(STEMS[number]) / "glued.json").stat().st_size < 1_000_000

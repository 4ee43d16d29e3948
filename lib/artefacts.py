"""Paper-scale results stored in the repository (results/), read back with their checksums.

``tools/paper.py`` trains and writes them; the chapters only read them.  ``load_run(name)``
checks every file of the run against ``results/MANIFEST.sha256`` before loading and returns
the trained networks in float64 (gated RNNs as :class:`lib.gated.GatedLinearRNN`, the other
architectures as :class:`lib.recurrent_cells.RecurrentNet`), ready to be re-evaluated on CPU.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from .data import sha256 as sha256_of

__all__ = ["load_run", "RESULTS", "sha256_of", "manifest_path"]

RESULTS = Path(__file__).resolve().parent.parent / "results"


def manifest_path(root: Path | None = None) -> Path:
    return (root or RESULTS) / "MANIFEST.sha256"


def load_run(name: str, root: str | Path | None = None) -> dict:
    """The artefact of experiment ``name``, verified against the manifest.

    Returns ``{"meta": dict, "task": dict, "groups": [{"kind", "layers", "widths", "seeds",
    "history", "model", "members"}]}`` with float64 models: for gated groups a StackedGatedRNN
    whose members are GatedLinearRNN, otherwise a ModuleStack of RecurrentNet members.
    Raises ``FileNotFoundError`` (naming the file and the command that writes it) if the run
    is missing and ``ValueError`` if a checksum does not match.
    """
    from .gated import StackedGatedRNN
    from .recurrent_cells import RecurrentNet
    from .training import ModuleStack

    root = Path(root) if root is not None else RESULTS
    folder = root / name
    manifest = manifest_path(root)
    files = [folder / "run.pt", folder / "meta.json"]
    for f in [manifest, *files]:
        if not f.is_file():
            raise FileNotFoundError(f"{f} is missing: write it with `make paper EXP={name}`")
    expected = {}
    for line in manifest.read_text().splitlines():
        if line.strip():
            digest, rel = line.split(None, 1)
            expected[rel.strip()] = digest
    for f in files:
        rel = f.relative_to(root).as_posix()
        if rel not in expected:
            raise ValueError(f"{rel} is not listed in {manifest}")
        got = sha256_of(f)
        if got != expected[rel]:
            raise ValueError(f"checksum mismatch for {f}: expected {expected[rel]}, got {got}")
    meta = json.loads(files[1].read_text())
    data = torch.load(files[0], map_location="cpu", weights_only=False)
    groups = []
    for g in data["groups"]:
        kind, layers = g.get("kind", "gated"), g.get("layers", 1)
        if kind == "gated":
            model = StackedGatedRNN(data["d_in"], g["widths"], data["d_out"], g["seeds"], dtype=torch.float64)
        else:
            model = ModuleStack([RecurrentNet(kind, data["d_in"], w, data["d_out"], layers=layers, seed=s,
                                              dtype=torch.float64) for w, s in zip(g["widths"], g["seeds"])])
        model.load_state_dict({k: v.double() for k, v in g["state"].items()})
        groups.append({"kind": kind, "layers": layers, "widths": g["widths"], "seeds": g["seeds"],
                       "history": g["history"], "seconds": g["seconds"], "model": model,
                       "members": [model.member(k) for k in range(model.K)]})
    return {"meta": meta, "task": data["task"], "groups": groups}

"""The two real data sets of the papers, located, checksum-verified and parsed.

* ``s1``: macaque S1 spike counts and hand velocity (Emami et al., Section 5.2), from
  Benjamin et al. (2018), file ``data/s1_data.mat`` of the KordingLab/spykesML repository.
* ``protein``: the Qian & Sejnowski (1988) protein secondary-structure set used by
  Sperduti (2015, Section 4), from the UCI Machine Learning Repository.

``s1_sequences`` cuts the S1 recording into the train / validation / test sequences of
Section 5.2 (normalised with training statistics).

Where a file is looked for, in order:
1. the ``path`` argument (a file or a folder holding the file);
2. the folder in the environment variable ``RNNBOOK_DATA`` (when set);
3. the project's ``shared/data`` folder (``../shared/data`` beside the repository);
4. the user cache (``pooch.os_cache("rnnbook")``, or ``RNNBOOK_CACHE`` when set);
5. a download from the public origin into that cache (``pooch.retrieve``), unless
   ``download=False``.
Whatever the source, the SHA-256 of the file is checked against the published sum; a
mismatch raises :class:`DataError` naming the file, the expected and the actual sum.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ._checks import positive_int, with_data

__all__ = ["DataError", "DATASETS", "locate", "load_s1", "s1_sequences", "s1_blocks", "s1_stretches", "load_protein", "ProteinSet",
           "sha256"]

REPO_ROOT = Path(__file__).resolve().parent.parent


class DataError(RuntimeError):
    """A data file is missing or does not match its published checksum."""


@dataclass(frozen=True)
class _Remote:
    filename: str
    sha256: str
    url: str


DATASETS: dict[str, _Remote] = {
    "s1_data.mat": _Remote(
        "s1_data.mat",
        "f6bbe27135636b944e0b715778dadae41dccf043c26cb880d0191665ca9e7dde",
        "https://github.com/KordingLab/spykesML/raw/master/data/s1_data.mat",
    ),
    "protein-secondary-structure.train": _Remote(
        "protein-secondary-structure.train",
        "d30a9151538dc5d82bcea09398cefe0d5d2147972bcf2bade6407fa728c66b32",
        "https://archive.ics.uci.edu/ml/machine-learning-databases/molecular-biology/"
        "protein-secondary-structure/protein-secondary-structure.train",
    ),
    "protein-secondary-structure.test": _Remote(
        "protein-secondary-structure.test",
        "19ef9733125778e6bb6df38963868ddf057318e2641ec11eb2e642f8b1b09d3d",
        "https://archive.ics.uci.edu/ml/machine-learning-databases/molecular-biology/"
        "protein-secondary-structure/protein-secondary-structure.test",
    ),
}


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _pooch():
    """pooch, imported without the warning its tqdm import prints in a notebook kernel that has
    no ipywidgets ("IProgress not found"): the book never shows pooch's progress bar."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import pooch
    return pooch


def _cache_dir() -> Path:
    env = os.environ.get("RNNBOOK_CACHE")
    if env:
        return Path(env)
    return Path(_pooch().os_cache("rnnbook"))


def _verified(path: Path, remote: _Remote) -> Path:
    try:
        actual = sha256(path)
    except OSError as exc:
        raise DataError(f"{remote.filename}: {path} cannot be read ({exc.strerror or exc}); "
                        "fix its permissions or point RNNBOOK_DATA elsewhere") from exc
    if actual != remote.sha256:
        raise DataError(
            f"{remote.filename}: checksum mismatch for {path}\n"
            f"  expected sha256 {remote.sha256}\n  actual   sha256 {actual}\n"
            "The file is corrupt or not the published one; delete it (or fix the path) and retry."
        )
    return path


def locate(filename: str, path: str | os.PathLike | None = None, *, download: bool = True,
           downloader=None) -> Path:
    """Find ``filename`` (a key of :data:`DATASETS`), verify its SHA-256, return its path.

    ``downloader`` is passed to :func:`pooch.retrieve` (tests use it to stand in for the
    network).  Raises :class:`DataError` when the file cannot be found or does not verify.
    """
    if filename not in DATASETS:
        raise ValueError(f"unknown data file {filename!r}; known: {sorted(DATASETS)}")
    remote = DATASETS[filename]
    looked: list[str] = []
    if path is not None:
        p = Path(path)
        candidate = p / filename if p.is_dir() else p
        if not candidate.is_file():
            raise DataError(f"{filename}: not found at the given path {candidate}")
        return _verified(candidate, remote)
    folders: list[Path] = []
    if os.environ.get("RNNBOOK_DATA"):
        env = Path(os.environ["RNNBOOK_DATA"])
        if not env.is_dir():
            raise DataError(f"RNNBOOK_DATA={env} is not a folder; point it at the folder holding the "
                            f"data files ({', '.join(sorted(DATASETS))}) or unset it")
        if not any((env / name).is_file() for name in DATASETS):
            raise DataError(f"RNNBOOK_DATA={env} holds none of the data files "
                            f"({', '.join(sorted(DATASETS))}); put them there or unset it")
        folders.append(env)
    folders.append(REPO_ROOT.parent / "shared" / "data")
    cache = _cache_dir()
    folders.append(cache)
    for folder in folders:
        candidate = folder / filename
        looked.append(str(candidate))
        if candidate.is_file():
            return _verified(candidate, remote)
    if not download:
        raise DataError(
            f"{filename}: not found (expected sha256 {remote.sha256}); looked in:\n  "
            + "\n  ".join(looked)
            + f"\nSet RNNBOOK_DATA to a folder holding it, or allow the download from {remote.url}"
        )
    pooch = _pooch()
    try:
        fetched = pooch.retrieve(remote.url, known_hash=f"sha256:{remote.sha256}", fname=filename,
                                 path=cache, downloader=downloader, progressbar=False)
    except ValueError as exc:  # pooch's hash mismatch
        raise DataError(f"{filename}: downloaded file from {remote.url} failed verification "
                        f"(expected sha256 {remote.sha256}): {exc}") from exc
    except Exception as exc:  # network or HTTP failure
        raise DataError(
            f"{filename}: not found locally (looked in: {', '.join(looked)}) and the download "
            f"from {remote.url} failed: {exc}"
        ) from exc
    return _verified(Path(fetched), remote)


def load_s1(path: str | os.PathLike | None = None, *, download: bool = True) -> dict[str, np.ndarray]:
    """The S1 recording: ``spikes`` (35129, 52) counts per 50 ms bin, ``vel`` and ``pos`` (35129, 2)."""
    from scipy.io import loadmat

    f = locate("s1_data.mat", path, download=download)
    mat = loadmat(f)
    out = {k: np.asarray(mat[k]) for k in ("spikes", "vel", "pos")}
    if out["spikes"].shape[0] != out["vel"].shape[0]:
        raise DataError(f"s1_data.mat: spikes and vel have different lengths in {f}")
    return out


def _windows(a: np.ndarray, T: int) -> np.ndarray:
    """Non-overlapping length-T windows of a (bins, d) array -> (bins // T, T, d)."""
    m = (a.shape[0] // T) * T
    return a[:m].reshape(-1, T, a.shape[1])


def s1_blocks(n_bins: int, *, fractions=(0.7, 0.1, 0.2), fold: int | None = None) -> dict[str, list[slice]]:
    """The train / validation / test blocks of a recording of ``n_bins`` bins, each a list of
    contiguous bin ranges.

    ``fold=None``: three contiguous blocks with the given ``fractions``, in that order (the test
    block lies after everything a model saw).  ``fold = f`` (0 <= f < K, K = 1 / fractions[2],
    which must be a whole number): the test block is the f-th of the K equal blocks of the
    recording, the validation block the ``fractions[1]`` of the recording just before it (for
    f = 0, the end of the recording), and the training block everything else, one or two
    contiguous pieces.  Fold K - 1 is the split of ``fold=None``.  Chapter 6 (section "Table 1")
    evaluates its claims over the K folds: the paper does not state its split.
    """
    n_bins = positive_int("n_bins", n_bins)
    fr = [float(f) for f in fractions]
    if len(fr) != 3 or any(f <= 0 for f in fr) or abs(sum(fr) - 1) > 1e-12:
        raise ValueError(f"fractions must be three positive numbers summing to 1, got {fractions!r}")
    if fold is None:
        cut1, cut2 = int(round(fr[0] * n_bins)), int(round((fr[0] + fr[1]) * n_bins))
        return {"train": [slice(0, cut1)], "val": [slice(cut1, cut2)], "test": [slice(cut2, n_bins)]}
    K = round(1 / fr[2])
    if abs(K * fr[2] - 1) > 1e-9 or fr[1] > fr[2] + 1e-12:
        raise ValueError(f"folds need 1 / fractions[2] to be a whole number and fractions[1] <= fractions[2], "
                         f"got {fractions!r}")
    fold = positive_int("fold", fold, minimum=0)
    if fold >= K:
        raise ValueError(f"fold must lie in 0..{K - 1} (the recording has {K} test blocks), got {fold}")
    t0, t1 = int(round(fold * fr[2] * n_bins)), int(round((fold + 1) * fr[2] * n_bins))
    if fold == 0:
        v0, v1 = int(round((1 - fr[1]) * n_bins)), n_bins
        train = [slice(t1, v0)]
    else:
        v0, v1 = int(round((fold * fr[2] - fr[1]) * n_bins)), t0
        train = [s for s in (slice(0, v0), slice(t1, n_bins)) if s.stop > s.start]
    return {"train": train, "val": [slice(v0, v1)], "test": [slice(t0, t1)]}


def s1_stretches(n_bins: int, train_bins: int, *, fractions=(0.7, 0.1, 0.2), fold: int | None = None) -> list[int]:
    """The offsets (in bins of the training block, its pieces read in order) of the disjoint
    stretches of ``train_bins`` bins that fit inside one piece of the training block of
    :func:`s1_blocks`: the limited-data runs of Chapter 6 take stretch k at offset ``[k]``."""
    train_bins = positive_int("train_bins", train_bins)
    offsets, start = [], 0
    for piece in s1_blocks(n_bins, fractions=fractions, fold=fold)["train"]:
        length = piece.stop - piece.start
        offsets += [start + j * train_bins for j in range(length // train_bins)]
        start += length
    return offsets


def _array(name: str, value) -> np.ndarray:
    """An array of float64 numbers from an array, a tensor with data or nested lists (a TypeError
    or ValueError naming ``name`` otherwise)."""
    if isinstance(value, torch.Tensor):
        value = with_data(name, value).detach().cpu()
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers (bins, channels), got {type(value).__name__}: "
                        f"{exc}") from None


def s1_sequences(spikes, vel, T: int = 15, *, fractions=(0.7, 0.1, 0.2), train_bins: int | None = None,
                 train_offset: int = 0, fold: int | None = None) -> dict[str, torch.Tensor]:
    """Cut the S1 recording into train / validation / test sequences of length T.

    spikes: (bins, n_neurons) counts; vel: (bins, 2) hand velocity.
    The recording is split in time into train, validation and test blocks by :func:`s1_blocks`:
    with ``fold=None`` three contiguous blocks with the given ``fractions`` (train, validation,
    test; in that order, so no window straddles two blocks and the test block lies after
    everything the model saw); with ``fold = f`` the f-th of the 1 / fractions[2] test blocks.
    ``train_bins`` keeps only that many bins of the training block starting at ``train_offset``
    (counted along its pieces; the stretch must lie inside one piece, see :func:`s1_stretches`):
    the paper's "limited data", 5400 bins = 4.5 min at 50 ms.  Inputs and outputs are z-scored
    per channel with the mean and standard deviation of the bins actually used for training.
    Each contiguous piece is cut into non-overlapping windows of T bins (the remainder is
    dropped); every window starts from a zero state.

    Returns float64 tensors x_train (N, T, n_neurons), y_train (N, T, 2), x_val, y_val,
    x_test, y_test, and the normalisation x_mean, x_std, y_mean, y_std.  Chapter 6, section
    "The data" (Emami et al. 2021, Section 5.2); ``load_s1`` reads the recording.
    """
    spikes, vel = _array("spikes", spikes), _array("vel", vel)
    if spikes.ndim != 2 or vel.ndim != 2:
        raise ValueError(f"spikes and vel must be 2-D (bins, channels), got {spikes.shape} and {vel.shape}")
    if not (np.isfinite(spikes).all() and np.isfinite(vel).all()):
        raise ValueError("spikes and vel must be finite (they contain NaN or infinite entries)")
    if spikes.shape[0] != vel.shape[0]:
        raise ValueError(f"spikes ({spikes.shape[0]} bins) and vel ({vel.shape[0]} bins) must have "
                         "the same number of bins")
    T = positive_int("T", T)
    n = spikes.shape[0]
    blocks = s1_blocks(n, fractions=fractions, fold=fold)
    n_train = sum(s.stop - s.start for s in blocks["train"])
    train_offset = positive_int("train_offset", train_offset, minimum=0)
    if train_bins is not None:
        train_bins = positive_int("train_bins", train_bins, minimum=T)
        if train_offset + train_bins > n_train:
            raise ValueError(f"train_offset + train_bins must be <= the training block's {n_train} bins, "
                             f"got {train_offset} + {train_bins}")
        start = 0
        for piece in blocks["train"]:
            length = piece.stop - piece.start
            if start <= train_offset < start + length:
                if train_offset + train_bins > start + length:
                    raise ValueError(f"the stretch of train_bins = {train_bins} bins at train_offset = {train_offset} "
                                     "straddles two pieces of the training block; see lib.data.s1_stretches")
                a = piece.start + train_offset - start
                blocks["train"] = [slice(a, a + train_bins)]
                break
            start += length
    elif train_offset != 0:
        raise ValueError("train_offset is only meaningful together with train_bins")
    for k, pieces in blocks.items():
        if sum(s.stop - s.start for s in pieces) < T:
            raise ValueError(f"the {k} block has {sum(s.stop - s.start for s in pieces)} bins, fewer than T = {T}")
    xs = np.concatenate([spikes[s] for s in blocks["train"]])
    ys = np.concatenate([vel[s] for s in blocks["train"]])
    x_mean, x_std = xs.mean(0), xs.std(0)
    y_mean, y_std = ys.mean(0), ys.std(0)
    # a constant channel (max == min exactly: its computed std is 0 or a rounding residue such as
    # 1e-16, which would blow its z-scores up to rounding noise of order one)
    x_std[np.ptp(xs, axis=0) == 0] = 1.0   # a silent (or constant) neuron stays at zero after centring
    constant = np.flatnonzero(np.ptp(ys, axis=0) == 0)
    if constant.size:        # a constant target has no z-score: every target would be 0/0
        raise ValueError(f"vel channel(s) {constant.tolist()} are constant over the {xs.shape[0]} training bins "
                         "used: the targets cannot be z-scored (choose other train_bins / train_offset, or "
                         "other data)")
    out: dict[str, torch.Tensor] = {}
    for k, pieces in blocks.items():
        out[f"x_{k}"] = torch.from_numpy(np.concatenate([_windows((spikes[s] - x_mean) / x_std, T) for s in pieces]))
        out[f"y_{k}"] = torch.from_numpy(np.concatenate([_windows((vel[s] - y_mean) / y_std, T) for s in pieces]))
    out.update(x_mean=torch.from_numpy(x_mean), x_std=torch.from_numpy(x_std),
               y_mean=torch.from_numpy(y_mean), y_std=torch.from_numpy(y_std))
    return out


@dataclass(frozen=True)
class ProteinSet:
    """Protein sequences (strings over the 20 amino-acid letters) and per-residue labels
    (strings over ``h`` helix, ``e`` strand, ``_`` coil), aligned residue by residue."""

    sequences: tuple[str, ...]
    labels: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.sequences)

    def filter_length(self, max_length: int) -> "ProteinSet":
        keep = [i for i, s in enumerate(self.sequences) if len(s) <= max_length]
        return ProteinSet(tuple(self.sequences[i] for i in keep), tuple(self.labels[i] for i in keep))

    @property
    def n_residues(self) -> int:
        return sum(len(s) for s in self.sequences)

    def count(self, label: str) -> int:
        return sum(lab.count(label) for lab in self.labels)


AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
_LABELS = "he_"


def parse_protein(text: str, source: str = "<text>") -> ProteinSet:
    """Parse the Qian-Sejnowski format: ``<>`` starts a sequence, ``<end>``/``end`` ends one
    (or the next ``<>`` does), other lines are ``AMINO LABEL``; lines before the first
    ``<>`` are comments."""
    seqs: list[str] = []
    labs: list[str] = []
    cur_s: list[str] | None = None
    cur_l: list[str] = []

    def close():
        nonlocal cur_s, cur_l
        if cur_s:
            seqs.append("".join(cur_s))
            labs.append("".join(cur_l))
        cur_s, cur_l = None, []

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line == "<>":
            close()
            cur_s, cur_l = [], []
            continue
        if line in ("<end>", "end"):
            close()
            continue
        if cur_s is None or not line:
            continue  # header comment, or blank line
        parts = line.split()
        if len(parts) != 2 or parts[0] not in AMINO_ACIDS or parts[1] not in _LABELS:
            raise DataError(f"{source}:{lineno}: expected 'AMINO LABEL' with AMINO in "
                            f"{AMINO_ACIDS} and LABEL in {_LABELS!r}, got {raw!r}")
        cur_s.append(parts[0])
        cur_l.append(parts[1])
    close()
    if not seqs:
        raise DataError(f"{source}: no sequences found")
    return ProteinSet(tuple(seqs), tuple(labs))


def load_protein(split: str = "train", path: str | os.PathLike | None = None, *,
                 download: bool = True) -> ProteinSet:
    """The Qian-Sejnowski protein secondary-structure ``train`` or ``test`` split."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    f = locate(f"protein-secondary-structure.{split}", path, download=download)
    return parse_protein(f.read_text(), source=str(f))

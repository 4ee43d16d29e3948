"""The real data sets: located, SHA-256 verified, parsed; the paper's counts; corrupt and
missing files give errors that name the file, the expected checksum and where we looked; the
S1 recording cut into train / validation / test sequences."""
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from lib import data

PROTEIN = "protein-secondary-structure.train"


@pytest.fixture(scope="module")
def data_dir() -> Path:
    """The folder the loaders find the data in (RNNBOOK_DATA or ../shared/data)."""
    return data.locate(PROTEIN, download=False).parent


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No RNNBOOK_DATA, no shared folder, an empty cache: the loader sees only what a test puts."""
    monkeypatch.delenv("RNNBOOK_DATA", raising=False)
    monkeypatch.setattr(data, "REPO_ROOT", tmp_path / "nowhere" / "repo")
    cache = tmp_path / "cache"
    monkeypatch.setenv("RNNBOOK_CACHE", str(cache))
    return cache


def test_protein_counts_of_the_paper():
    """Sperduti (2015) §4: sequences of length <= 159 are 71 sequences, 7207 residues, 2282 helix."""
    train = data.load_protein("train", download=False)
    short = train.filter_length(159)
    assert len(short) == 71
    assert short.n_residues == 7207
    assert short.count("h") == 2282
    assert short.n_residues - short.count("h") == 4925
    assert all(len(s) == len(lab) for s, lab in zip(short.sequences, short.labels))
    assert set("".join(short.sequences)) <= set(data.AMINO_ACIDS)


def test_protein_test_split_parses():
    test = data.load_protein("test", download=False)
    assert len(test) > 0 and test.n_residues == sum(len(lab) for lab in test.labels)


def test_s1_shapes():
    s1 = data.load_s1(download=False)
    assert s1["spikes"].shape == (35129, 52)
    assert s1["vel"].shape == (35129, 2)
    assert np.isfinite(s1["vel"]).all() and (s1["spikes"] >= 0).all()


def test_explicit_path_file_or_folder(data_dir, isolated):
    assert data.locate(PROTEIN, data_dir) == data_dir / PROTEIN
    assert data.locate(PROTEIN, data_dir / PROTEIN) == data_dir / PROTEIN


def test_environment_variable_is_searched(data_dir, isolated, monkeypatch):
    monkeypatch.setenv("RNNBOOK_DATA", str(data_dir))
    assert data.locate(PROTEIN, download=False) == data_dir / PROTEIN


def test_corrupted_copy_is_rejected(data_dir, tmp_path):
    bad = tmp_path / PROTEIN
    raw = bytearray((data_dir / PROTEIN).read_bytes())
    raw[1000] ^= 0x01  # one flipped bit
    bad.write_bytes(bytes(raw))
    with pytest.raises(data.DataError) as err:
        data.load_protein("train", path=tmp_path)
    msg = str(err.value)
    assert PROTEIN in msg and data.DATASETS[PROTEIN].sha256 in msg and str(bad) in msg


def test_corrupted_copy_in_the_search_path_is_rejected(data_dir, isolated, monkeypatch, tmp_path):
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "s1_data.mat").write_bytes(b"not a matlab file")
    monkeypatch.setenv("RNNBOOK_DATA", str(folder))
    with pytest.raises(data.DataError, match="checksum mismatch"):
        data.load_s1(download=False)


def test_missing_file_names_where_it_looked(isolated):
    with pytest.raises(data.DataError) as err:
        data.load_protein("test", download=False)
    msg = str(err.value)
    assert "protein-secondary-structure.test" in msg
    assert data.DATASETS["protein-secondary-structure.test"].sha256 in msg
    assert str(isolated) in msg and "RNNBOOK_DATA" in msg


def test_missing_explicit_path(tmp_path):
    with pytest.raises(data.DataError, match="not found at the given path"):
        data.load_protein("train", path=tmp_path / "nope")


def test_download_goes_to_the_cache_and_is_verified(data_dir, isolated):
    """The download path (pooch) with a stand-in for the network that serves the real file."""
    served = []

    def downloader(url, output_file, pooch_obj):
        served.append(url)
        shutil.copyfile(data_dir / PROTEIN, output_file)

    path = data.locate(PROTEIN, downloader=downloader)
    assert served == [data.DATASETS[PROTEIN].url]
    assert path == isolated / PROTEIN and path.is_file()
    # second call: found in the cache, no download
    assert data.locate(PROTEIN, downloader=downloader) == path and len(served) == 1


def test_corrupt_download_is_rejected(isolated):
    def downloader(url, output_file, pooch_obj):
        Path(output_file).write_text("<html>rate limited</html>")

    with pytest.raises(data.DataError) as err:
        data.locate(PROTEIN, downloader=downloader)
    assert "failed verification" in str(err.value) and data.DATASETS[PROTEIN].sha256 in str(err.value)
    assert not (isolated / PROTEIN).exists()


def test_failed_download_is_a_data_error(isolated):
    def downloader(url, output_file, pooch_obj):
        raise OSError("network is unreachable")

    with pytest.raises(data.DataError, match="network is unreachable"):
        data.locate(PROTEIN, downloader=downloader)


def test_bad_names_and_formats():
    with pytest.raises(ValueError, match="unknown data file"):
        data.locate("nope.csv")
    with pytest.raises(ValueError, match="split must be"):
        data.load_protein("validation")
    with pytest.raises(data.DataError, match="<text>:3"):
        data.parse_protein("header\n<>\nA x\n")
    with pytest.raises(data.DataError, match="no sequences"):
        data.parse_protein("just a header\n")


def test_parser_on_a_small_example():
    text = "comment line\n<>\nA h\nC _\nend\n<>\nW e\n<end>\n"
    s = data.parse_protein(text)
    assert s.sequences == ("AC", "W") and s.labels == ("h_", "e")
    assert s.count("h") == 1 and s.n_residues == 3


# ----------------------------------------------------------------------------- S1 windows

def _fake_recording(bins=1000, neurons=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.poisson(2.0, size=(bins, neurons)).astype(np.uint8), rng.normal(size=(bins, 2))


def test_s1_sequences_split_windows_and_normalisation():
    spikes, vel = _fake_recording()
    S = data.s1_sequences(spikes, vel, T=15, fractions=(0.7, 0.1, 0.2))
    assert S["x_train"].shape == (700 // 15, 15, 4) and S["y_val"].shape == (100 // 15, 15, 2)
    assert S["x_test"].shape == (200 // 15, 15, 4)
    used = (spikes[:700 // 15 * 15] - S["x_mean"].numpy()) / S["x_std"].numpy()
    assert np.allclose(S["x_train"].reshape(-1, 4).numpy(), used)
    # statistics are those of the whole training block (the windows drop its last 10 bins)
    assert np.allclose(S["x_mean"].numpy(), spikes[:700].mean(0))
    # the test block is the end of the recording, in order
    last = (vel[800:800 + 200 // 15 * 15] - S["y_mean"].numpy()) / S["y_std"].numpy()
    assert np.allclose(S["y_test"].reshape(-1, 2).numpy(), last)
    # limited data: a stretch of the training block, normalised with its own statistics
    L = data.s1_sequences(spikes, vel, T=15, train_bins=300, train_offset=150)
    assert L["x_train"].shape == (20, 15, 4)
    assert np.allclose(L["y_mean"].numpy(), vel[150:450].mean(0))
    assert torch.allclose(L["y_train"].reshape(-1, 2).mean(0), torch.zeros(2, dtype=torch.float64), atol=1e-12)


def test_s1_folds_cover_the_recording_and_the_last_is_the_default_split():
    spikes, vel = _fake_recording()
    for f in range(5):
        B = data.s1_blocks(1000, fold=f)
        bins = sorted(i for pieces in B.values() for s in pieces for i in range(s.start, s.stop))
        assert bins == list(range(1000))                                    # every bin once
        assert [s.stop - s.start for s in B["test"]] == [200] and B["test"][0].start == 200 * f
        assert B["val"][0].stop == (200 * f if f else 1000) and B["val"][0].stop - B["val"][0].start == 100
    assert data.s1_blocks(1000, fold=4) == data.s1_blocks(1000)
    A, D = data.s1_sequences(spikes, vel, T=15, fold=4), data.s1_sequences(spikes, vel, T=15)
    assert all(torch.equal(A[k], D[k]) for k in D)
    F = data.s1_sequences(spikes, vel, T=15, fold=2)                        # train: bins 0-300 and 600-1000
    assert F["x_train"].shape[0] == 300 // 15 + 400 // 15
    assert np.allclose(F["x_mean"].numpy(), np.concatenate([spikes[:300], spikes[600:]]).mean(0))
    assert data.s1_stretches(1000, 250, fold=2) == [0, 300]                # no stretch straddles the gap 300-600
    L = data.s1_sequences(spikes, vel, T=15, fold=2, train_bins=250, train_offset=300)
    assert np.allclose(L["y_mean"].numpy(), vel[600:850].mean(0))
    with pytest.raises(ValueError, match="straddles"):
        data.s1_sequences(spikes, vel, T=15, fold=2, train_bins=250, train_offset=200)
    with pytest.raises(ValueError, match="fold must lie in 0..4"):
        data.s1_blocks(1000, fold=5)
    with pytest.raises(ValueError, match="whole number"):
        data.s1_blocks(1000, fractions=(0.6, 0.1, 0.3), fold=0)


def test_s1_sequences_bad_input():
    spikes, vel = _fake_recording()
    with pytest.raises(ValueError, match="same number of bins"):
        data.s1_sequences(spikes, vel[:-1])
    with pytest.raises(ValueError, match="fractions"):
        data.s1_sequences(spikes, vel, fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="train_bins"):
        data.s1_sequences(spikes, vel, train_bins=800)
    with pytest.raises(ValueError, match="train_offset"):
        data.s1_sequences(spikes, vel, train_offset=3)
    with pytest.raises(ValueError, match="T"):
        data.s1_sequences(spikes, vel, T=0)
    with pytest.raises(ValueError, match="2-D"):
        data.s1_sequences(spikes.ravel(), vel)

"""libsvm files: read on the workers equal to scikit-learn's reader; dump and read back.

Files are written by scikit-learn's ``dump_svmlight_file`` (the reference format) and read with
:func:`dml.datasets.read_svmlight` cut into byte ranges of many sizes (one range per file down
to dozens per file), then compared with ``sklearn.datasets.load_svmlight_file(s)`` bit for bit.
"""
from __future__ import annotations

import gzip
import shutil

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file, load_svmlight_files

from dml.datasets import dump_svmlight, read_svmlight


def make_data(n=200, d=30, seed=0, density=0.15):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed,
                  data_rvs=lambda k: np.round(rng.normal(size=k), 3))
    keep = np.ones(n)
    keep[3] = 0  # a row without entries
    X = (sp.diags(keep) @ X).tocsr()
    X.eliminate_zeros()
    y = rng.integers(0, 3, size=n).astype(np.float64)
    return X, y


def assert_same(X, y, Xref, yref):
    assert isinstance(X, da.Array) and not any(np.isnan(c) for c in X.chunks[0])
    assert X.chunks[0] == y.chunks[0]
    Xc = X.compute()
    assert sp.issparse(Xc) and Xc.format == "csr"
    assert Xc.shape == Xref.shape and Xc.dtype == Xref.dtype
    Xref = sp.csr_matrix(Xref)
    np.testing.assert_array_equal(Xc.indptr, Xref.indptr)
    np.testing.assert_array_equal(Xc.indices, Xref.indices)
    np.testing.assert_array_equal(Xc.data, Xref.data)
    np.testing.assert_array_equal(y.compute(), yref)


@pytest.mark.parametrize("zero_based", [True, False])
@pytest.mark.parametrize("blocksize", [10**6, pytest.param(997, marks=pytest.mark.slow), 61])
def test_read_equals_sklearn(client, tmp_path, zero_based, blocksize):
    X, y = make_data()
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path), zero_based=zero_based, comment="made by a test")
    Xref, yref = load_svmlight_file(path)  # zero_based="auto" on both sides
    Xd, yd = read_svmlight(str(path), blocksize=blocksize)
    assert_same(Xd, yd, Xref, yref)
    assert Xd.npartitions == -(-path.stat().st_size // blocksize)


def test_many_ranges_and_dtype(inprocess_client, tmp_path):
    X, y = make_data(n=300)
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    blocksize = path.stat().st_size // 64 + 1
    Xd, yd = read_svmlight(path, blocksize=blocksize, dtype=np.float32)
    assert Xd.npartitions == 64
    Xref, yref = load_svmlight_file(path, dtype=np.float32)
    assert_same(Xd, yd, Xref, yref)
    assert isinstance(Xd.blocks[5].compute(), sp.csr_matrix)


@pytest.mark.parametrize("n_files", [1, 3, 7])
def test_glob_directory_and_list_of_files(inprocess_client, tmp_path, n_files):
    paths = []
    for i in range(n_files):
        X, y = make_data(n=40 + 10 * i, seed=i)
        paths.append(tmp_path / f"part-{i}.svm")
        dump_svmlight_file(X, y, str(paths[-1]), zero_based=False)
    ref = load_svmlight_files([str(p) for p in paths])
    Xref = sp.vstack(ref[0::2]).tocsr()
    yref = np.concatenate(ref[1::2])
    for source in (str(tmp_path / "part-*.svm"), str(tmp_path), [str(p) for p in paths]):
        Xd, yd = read_svmlight(source, blocksize=500)
        assert_same(Xd, yd, Xref, yref)


def test_compressed_files_qid_and_n_features(inprocess_client, tmp_path):
    X, y = make_data(n=50)
    qid = np.repeat(np.arange(10), 5)
    plain = tmp_path / "q.svm"
    dump_svmlight_file(X, y, str(plain), query_id=qid)
    with open(plain, "rb") as src, gzip.open(tmp_path / "q.svm.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    Xref, yref, qref = load_svmlight_file(plain, query_id=True, n_features=40)
    for path in (plain, tmp_path / "q.svm.gz"):
        Xd, yd, qd = read_svmlight(path, query_id=True, n_features=40, blocksize=100)
        assert_same(Xd, yd, Xref, yref)
        np.testing.assert_array_equal(qd.compute(), qref)
    with pytest.raises(ValueError, match="n_features was set to 5, but input file contains"):
        read_svmlight(plain, n_features=5)


def test_dump_then_read_round_trip(client, tmp_path):
    X, y = make_data(n=120)
    Xd = da.from_array(X, chunks=(25, 30), asarray=False)
    files = dump_svmlight(Xd, da.from_array(y, chunks=50), tmp_path / "out")
    assert len(files) == 5
    # scikit-learn reads what dml wrote.
    ref = load_svmlight_files(files, n_features=30, zero_based=True)
    Xs = sp.vstack(ref[0::2]).tocsr()
    np.testing.assert_array_equal(Xs.toarray(), X.toarray())
    np.testing.assert_array_equal(np.concatenate(ref[1::2]), y)
    # and dml reads it back, from the directory.
    X2, y2 = read_svmlight(tmp_path / "out", n_features=30, zero_based=True)
    np.testing.assert_array_equal(X2.compute().toarray(), X.toarray())
    np.testing.assert_array_equal(y2.compute(), y)
    # A pattern, one-based, dense blocks.
    files = dump_svmlight(da.from_array(X.toarray(), chunks=(60, 30)), y,
                          tmp_path / "dense" / "b-*.txt", zero_based=False)
    assert [f.rsplit("/", 1)[1] for f in files] == ["b-0.txt", "b-1.txt"]
    X3, y3 = read_svmlight(files, n_features=30)
    np.testing.assert_array_equal(X3.compute().toarray(), X.toarray())
    # In-memory X: one file, scikit-learn's writer.
    [one] = dump_svmlight(X, y, tmp_path / "one.svm")
    X4, y4 = read_svmlight(one, n_features=30, zero_based=True)
    np.testing.assert_array_equal(X4.compute().toarray(), X.toarray())


# --------------------------------------------------------------------------------------------
# Untrusted files
# --------------------------------------------------------------------------------------------

BAD_LINES = [
    ("1 3:abc", r"the value in '3:abc' is not a number"),
    ("1 3:1 2:1", r"feature indices must be increasing and unique; '2:1' follows index 3"),
    ("yes 1:1", r"the label 'yes' is not a number"),
    ("1 -4:2", r"negative feature index in '-4:2'"),
    ("1 1:2 foo", r"'foo' is not <index>:<value>"),
    ("1 x:2", r"the feature index in 'x:2' is not an integer"),
    ("1 99999999999:1", r"feature index in '99999999999:1' is larger than"),
]


@pytest.mark.parametrize("bad, message", BAD_LINES)
@pytest.mark.parametrize("blocksize", [10**6, 50])
def test_malformed_line_names_file_and_line(inprocess_client, tmp_path, bad, message,
                                            blocksize):
    lines = [f"{i % 2} {1 + i % 3}:1.5 7:2" for i in range(40)]
    lines[28] = bad
    path = tmp_path / "bad.svm"
    path.write_text("# header comment\n" + "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"bad\.svm, line 30: {message}"):
        read_svmlight(path, blocksize=blocksize)


def test_index_zero_in_a_one_based_file(inprocess_client, tmp_path):
    path = tmp_path / "z.svm"
    path.write_text("1 1:1\n0 2:1\n1 0:3 2:1\n")
    with pytest.raises(ValueError, match=r"z\.svm, line 3: feature index 0 in '0:3', but "
                                         r"zero_based=False"):
        read_svmlight(path, zero_based=False)
    X, _ = read_svmlight(path)  # auto: index 0 present, so zero-based
    np.testing.assert_array_equal(X.compute().toarray(), load_svmlight_file(path)[0].toarray())


def test_missing_files_and_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file matches the pattern"):
        read_svmlight(str(tmp_path / "nothing-*.svm"))
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        read_svmlight(tmp_path / "absent.svm")
    with pytest.raises(ValueError, match="The 'blocksize' parameter of read_svmlight"):
        read_svmlight(tmp_path, blocksize=0)
    with pytest.raises(ValueError, match="X has 3 rows but y has shape"):
        dump_svmlight(da.ones((3, 2), chunks=2), np.ones(4), tmp_path / "o")


@pytest.mark.parametrize("blocksize", [10**6, 7, 23])
def test_awkward_layouts(inprocess_client, tmp_path, blocksize):
    """Blank and comment lines at range ends, CRLF line ends, no final newline, an empty file
    and a file of comments only: the same rows as scikit-learn, each read once."""
    text = ("# a comment line that is longer than a range\n\n1 1:1 3:2\r\n"
            "# another\n0 2:0.5 # trailing comment\n\n\n1 qid:3 1:4\n0 3:1")
    path = tmp_path / "odd.svm"
    path.write_bytes(text.encode())
    (tmp_path / "empty.svm").write_bytes(b"")
    (tmp_path / "comments.svm").write_bytes(b"# nothing\n# here\n")
    Xref, yref = load_svmlight_file(str(path))
    X, y = read_svmlight(path, blocksize=blocksize)
    assert_same(X, y, Xref, yref)
    files = [path, tmp_path / "empty.svm", tmp_path / "comments.svm"]
    ref = load_svmlight_files([str(f) for f in files])  # 'auto': files without entries make
    X, y = read_svmlight(files, blocksize=blocksize)    # it zero-based, as here
    assert_same(X, y, sp.vstack(ref[0::2]).tocsr(), np.concatenate(ref[1::2]))
    X, y = read_svmlight(tmp_path / "empty.svm")
    assert X.shape == (0, 1) and y.compute().shape == (0,)

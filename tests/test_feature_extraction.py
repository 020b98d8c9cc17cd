"""Sparse features from text and named features: equal to scikit-learn on the same documents.

Every producer is compared with scikit-learn's class on the same documents, bit for bit
(vocabulary, ``idf_``, the matrices' indices, indptr and values), for in-memory input and for
Dask Series/Bags cut into 1, 3, 7 and 64 partitions, on the in-process cluster and (one case
per class) on the multi-process cluster.
"""
from __future__ import annotations

import dask.array as da
import dask.bag as db
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import sklearn.feature_extraction as skfe
import sklearn.feature_extraction.text as sktext

import dml
from _matrix import checkerboard
from dml.feature_extraction import FeatureHasher
from dml.feature_extraction.text import (CountVectorizer, HashingVectorizer, TfidfTransformer,
                                         TfidfVectorizer)

PARTITIONS = [1, 3, 7, 64]

_WORDS = ("alpha beta Gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "
          "rho sigma tau upsilon phi chi psi omega the a of and to in is it café naïve 42 "
          "x1 hello-world don't").split()


def corpus(n=300, seed=0):
    """Documents with repeated words (ties in frequencies), case, accents, punctuation,
    numbers, a few empty ones."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(_WORDS) + 1)
    p /= p.sum()
    docs = []
    for i in range(n):
        if i % 50 == 7:
            docs.append("")
            continue
        k = int(rng.integers(1, 15))
        words = rng.choice(_WORDS, size=k, p=p)
        docs.append(" ".join(words) + (". " if i % 3 else "!"))
    return docs


DOCS = corpus()


def as_series(docs, nparts):
    return dd.from_pandas(pd.Series(docs, dtype=object), npartitions=nparts, sort=False)


def as_bag(docs, nparts):
    return db.from_sequence(docs, npartitions=nparts)


def assert_same_csr(ours, ref):
    """Same matrix to the last bit: shape, dtype, structure and values (entries of a row
    compared in column order: scikit-learn's fit_transform leaves them in the order the terms
    were met, its transform sorts them)."""
    if isinstance(ours, da.Array):
        ours = ours.compute()
    assert sp.issparse(ours) and ours.format == "csr"
    ref = sp.csr_matrix(ref).sorted_indices()
    ours = sp.csr_matrix(ours).sorted_indices()
    assert ours.shape == ref.shape
    assert ours.dtype == ref.dtype
    np.testing.assert_array_equal(ours.indptr, ref.indptr)
    np.testing.assert_array_equal(ours.indices, ref.indices)
    np.testing.assert_array_equal(ours.data, ref.data)


def _chunks_known(X, nrows):
    assert not any(np.isnan(c) for c in X.chunks[0])
    assert sum(X.chunks[0]) == nrows


# --------------------------------------------------------------------------------------------
# Hashing
# --------------------------------------------------------------------------------------------

HASHING_PARAMS = [
    {},
    {"n_features": 2**10, "ngram_range": (1, 2), "binary": True},
    {"n_features": 64, "norm": "l1", "alternate_sign": False, "lowercase": False},
    {"n_features": 256, "analyzer": "char_wb", "ngram_range": (2, 3), "norm": None,
     "dtype": np.float32, "stop_words": None},
]


@pytest.mark.parametrize("params,nparts", checkerboard(HASHING_PARAMS, PARTITIONS))
def test_hashing_vectorizer_equals_sklearn(inprocess_client, params, nparts):
    ref = sktext.HashingVectorizer(**params).transform(DOCS)
    hv = HashingVectorizer(**params)
    X = hv.transform(as_series(DOCS, nparts))
    assert X.npartitions == nparts
    _chunks_known(X, len(DOCS))
    assert_same_csr(X, ref)
    assert_same_csr(hv.fit_transform(as_bag(DOCS, nparts)), ref)


def test_hashing_vectorizer_both_clusters(client):
    ref = sktext.HashingVectorizer(n_features=2**12).transform(DOCS)
    X = HashingVectorizer(n_features=2**12).transform(as_series(DOCS, 7))
    assert isinstance(X.blocks[0].compute(), sp.csr_matrix)
    assert_same_csr(X, ref)
    # In-memory input: a scipy CSR matrix, computed in this process.
    assert_same_csr(HashingVectorizer(n_features=2**12).transform(DOCS), ref)
    assert_same_csr(HashingVectorizer(n_features=2**12).transform(np.asarray(DOCS)), ref)


@pytest.mark.parametrize("nparts", PARTITIONS)
def test_feature_hasher_equals_sklearn(inprocess_client, nparts):
    dicts = [{w: len(w) for w in d.split()} for d in DOCS]
    ref = skfe.FeatureHasher(n_features=512).transform(dicts)
    X = FeatureHasher(n_features=512).transform(as_bag(dicts, nparts))
    _chunks_known(X, len(dicts))
    assert_same_csr(X, ref)
    tokens = [d.split() or ["empty"] for d in DOCS]
    params = {"n_features": 128, "input_type": "string", "alternate_sign": False,
              "dtype": np.float32}
    assert_same_csr(FeatureHasher(**params).transform(as_bag(tokens, nparts)),
                    skfe.FeatureHasher(**params).transform(tokens))
    pairs = [[(w, 0.5) for w in t] for t in tokens]
    assert_same_csr(FeatureHasher(n_features=64, input_type="pair").transform(
        as_bag(pairs, nparts)), skfe.FeatureHasher(n_features=64, input_type="pair")
        .transform(pairs))


def test_feature_hasher_both_clusters(client):
    dicts = [{w: 1.0 for w in d.split()} for d in DOCS]
    ref = skfe.FeatureHasher(n_features=32).transform(dicts)
    assert_same_csr(FeatureHasher(n_features=32).transform(as_bag(dicts, 3)), ref)
    assert_same_csr(FeatureHasher(n_features=32).transform(dicts), ref)


def test_empty_partitions_give_empty_blocks(inprocess_client):
    parts = [DOCS[:5], [], DOCS[5:9], []]
    bag = db.from_delayed([dask_delayed(p) for p in parts])
    X = HashingVectorizer(n_features=32).transform(bag)
    assert X.chunks[0] == (5, 0, 4, 0)
    assert_same_csr(X, sktext.HashingVectorizer(n_features=32).transform(DOCS[:9]))
    cv = CountVectorizer()
    assert_same_csr(cv.fit_transform(bag), sktext.CountVectorizer().fit_transform(DOCS[:9]))


def dask_delayed(obj):
    from dask import delayed
    return delayed(obj, pure=True)


# --------------------------------------------------------------------------------------------
# Counts and tf-idf
# --------------------------------------------------------------------------------------------

COUNT_PARAMS = [
    {},
    {"min_df": 2, "max_df": 0.5},
    {"max_features": 12},
    {"max_features": 9, "binary": True},
    {"ngram_range": (1, 2), "stop_words": "english", "min_df": 0.02},
    {"lowercase": False, "max_df": 30, "dtype": np.int32},
    {"analyzer": "char", "ngram_range": (2, 2), "max_features": 40},
    {"vocabulary": ["beta", "alpha", "omega", "café"]},
]


@pytest.mark.parametrize("params,nparts", checkerboard(COUNT_PARAMS, PARTITIONS))
def test_count_vectorizer_equals_sklearn(inprocess_client, params, nparts):
    ref = sktext.CountVectorizer(**params)
    Xref = ref.fit_transform(DOCS)
    cv = CountVectorizer(**params).fit(as_series(DOCS, nparts))
    assert cv.vocabulary_ == ref.vocabulary_
    assert list(cv.get_feature_names_out()) == list(ref.get_feature_names_out())
    assert cv.fixed_vocabulary_ == ref.fixed_vocabulary_
    X = cv.transform(as_bag(DOCS, nparts))
    _chunks_known(X, len(DOCS))
    assert_same_csr(X, Xref)
    cv2 = CountVectorizer(**params)
    X2 = cv2.fit_transform(as_bag(DOCS, nparts))
    _chunks_known(X2, len(DOCS))
    assert cv2.vocabulary_ == ref.vocabulary_
    assert_same_csr(X2, Xref)


def test_count_vectorizer_in_memory_and_both_clusters(client):
    params = {"min_df": 2, "max_features": 15, "ngram_range": (1, 2)}
    ref = sktext.CountVectorizer(**params)
    Xref = ref.fit_transform(DOCS)
    for docs in (DOCS, pd.Series(DOCS), as_series(DOCS, 7)):
        cv = CountVectorizer(**params)
        assert_same_csr(cv.fit_transform(docs), Xref)
        assert cv.vocabulary_ == ref.vocabulary_
    assert_same_csr(cv.transform(DOCS[:20]), ref.transform(DOCS[:20]))


TFIDF_PARAMS = [
    {},
    {"norm": "l1", "sublinear_tf": True, "min_df": 2},
    {"use_idf": False, "max_features": 10},
    {"smooth_idf": False, "dtype": np.float32, "ngram_range": (1, 2)},
    {"binary": True, "max_df": 0.3, "norm": None},
    {"vocabulary": {"beta": 1, "alpha": 0, "zeta": 2}},
]


@pytest.mark.parametrize("params,nparts", checkerboard(TFIDF_PARAMS, PARTITIONS))
def test_tfidf_vectorizer_equals_sklearn(inprocess_client, params, nparts):
    ref = sktext.TfidfVectorizer(**params)
    Xref = ref.fit_transform(DOCS)
    tv = TfidfVectorizer(**params)
    X = tv.fit_transform(as_series(DOCS, nparts))
    assert tv.vocabulary_ == ref.vocabulary_
    if params.get("use_idf", True):
        assert tv.idf_.dtype == ref.idf_.dtype
        np.testing.assert_array_equal(tv.idf_, ref.idf_)
    else:
        assert not hasattr(tv, "idf_")
    _chunks_known(X, len(DOCS))
    # Bit for bit equal to scikit-learn's transform; its fit_transform normalises rows whose
    # entries are in the order the terms were met, which can change the last bit of a norm.
    assert_same_csr(X, ref.transform(DOCS))
    np.testing.assert_allclose(X.compute().toarray(), Xref.toarray(), rtol=1e-6 if
                               params.get("dtype") == np.float32 else 1e-14)
    assert_same_csr(tv.transform(as_bag(DOCS[:40], nparts)), ref.transform(DOCS[:40]))


def test_tfidf_vectorizer_both_clusters(client):
    ref = sktext.TfidfVectorizer(sublinear_tf=True).fit(DOCS)
    Xref = ref.transform(DOCS)
    tv = TfidfVectorizer(sublinear_tf=True)
    assert_same_csr(tv.fit_transform(as_bag(DOCS, 7)), Xref)
    np.testing.assert_array_equal(tv.idf_, ref.idf_)
    assert_same_csr(TfidfVectorizer(sublinear_tf=True).fit_transform(DOCS), Xref)


@pytest.mark.parametrize("params,nparts", checkerboard(
    [{}, {"norm": "l1", "smooth_idf": False}, {"sublinear_tf": True, "use_idf": False}],
    PARTITIONS))
def test_tfidf_transformer_equals_sklearn(inprocess_client, params, nparts):
    counts = sktext.CountVectorizer().fit_transform(DOCS)
    ref = sktext.TfidfTransformer(**params).fit(counts)
    X = CountVectorizer().fit_transform(as_series(DOCS, nparts))
    tt = TfidfTransformer(**params).fit(X)
    if params.get("use_idf", True):
        np.testing.assert_array_equal(tt.idf_, ref.idf_)
    assert tt.n_features_in_ == counts.shape[1]
    out = tt.transform(X)
    assert out.chunks[0] == X.chunks[0]
    assert_same_csr(out, ref.transform(counts))


def test_tfidf_transformer_dense_blocks_and_both_clusters(client):
    counts = sktext.CountVectorizer().fit_transform(DOCS)
    dense = da.from_array(counts.toarray().astype(np.float32), chunks=(45, 10))
    ref = sktext.TfidfTransformer().fit(counts.toarray().astype(np.float32))
    tt = TfidfTransformer().fit(dense)
    np.testing.assert_array_equal(tt.idf_, ref.idf_)
    assert_same_csr(tt.transform(dense), ref.transform(counts.toarray().astype(np.float32)))
    # In-memory input: scikit-learn's own code.
    np.testing.assert_array_equal(TfidfTransformer().fit(counts).idf_,
                                  sktext.TfidfTransformer().fit(counts).idf_)


def test_pipeline_to_a_classifier(inprocess_client):
    from sklearn.pipeline import make_pipeline
    from sklearn.naive_bayes import MultinomialNB

    y = np.array([int("alpha" in d) for d in DOCS])
    ours = make_pipeline(CountVectorizer(min_df=2), MultinomialNB()).fit(DOCS, y)
    ref = make_pipeline(sktext.CountVectorizer(min_df=2), MultinomialNB()).fit(DOCS, y)
    np.testing.assert_array_equal(ours.predict(DOCS), ref.predict(DOCS))


# --------------------------------------------------------------------------------------------
# Model files
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: CountVectorizer(min_df=2, ngram_range=(1, 2)),
                                  lambda: TfidfVectorizer(max_features=20, sublinear_tf=True),
                                  lambda: TfidfVectorizer(vocabulary=["beta", "alpha"]),
                                  lambda: HashingVectorizer(n_features=64),
                                  lambda: TfidfTransformer()])
def test_model_file_round_trip(inprocess_client, tmp_path, make):
    est = make()
    if isinstance(est, TfidfTransformer):
        est.fit(sktext.CountVectorizer().fit_transform(DOCS))
        X = sktext.CountVectorizer().fit_transform(DOCS)
    else:
        est.fit(as_bag(DOCS, 3))
        X = DOCS
    loaded = dml.load(dml.save(est, tmp_path / "m.dml"))
    assert type(loaded) is type(est)
    assert loaded.get_params() == est.get_params()
    for attr in ("vocabulary_", "idf_"):
        if hasattr(est, attr):
            got, want = getattr(loaded, attr), getattr(est, attr)
            if isinstance(want, dict):
                assert got == want and all(type(v) is int for v in got.values())
            else:
                np.testing.assert_array_equal(got, want)
                assert got.dtype == want.dtype
    assert_same_csr(loaded.transform(X), est.transform(X))


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [HashingVectorizer, CountVectorizer, TfidfVectorizer])
def test_non_string_documents(inprocess_client, make):
    docs = pd.Series(["ab cd", "ef gh", np.nan, "ij kl"], dtype=object)
    with pytest.raises(ValueError, match=r"document 0 of partition 1 is missing \((nan|<NA>)\).*"
                                         r"fillna"):
        make().fit_transform(dd.from_pandas(docs, npartitions=2)).compute()
    with pytest.raises(ValueError, match=r"document 2 is missing"):
        make().fit_transform(docs)
    bag = db.from_sequence(["ab cd", 17, "ef"], npartitions=1)
    with pytest.raises(TypeError, match=r"document 1 of partition 0 is a int \(17\), not a "
                                        r"string"):
        make().fit_transform(bag).compute()


@pytest.mark.parametrize("make", [HashingVectorizer, CountVectorizer, TfidfVectorizer])
def test_other_bad_document_collections(make):
    with pytest.raises(ValueError, match="Iterable over raw text documents expected, string "
                                         "object received"):
        make().fit_transform("one document")
    frame = pd.DataFrame({"text": ["ab cd"], "other": ["ef"]})
    with pytest.raises(TypeError, match=r"DataFrame with 2 columns; pass the one column"):
        make().fit_transform(frame)
    one = make().fit_transform(frame[["text"]])
    assert one.shape[0] == 1
    with pytest.raises(ValueError, match="expected a 1-D collection of documents"):
        make().fit_transform(np.array([["ab", "cd"], ["ef", "gh"]]))


def test_vocabulary_errors_as_sklearn(inprocess_client):
    with pytest.raises(ValueError, match="empty vocabulary; perhaps the documents only contain "
                                         "stop words"):
        CountVectorizer(stop_words=["ab"]).fit(as_bag(["ab ab", "ab"], 2))
    with pytest.raises(ValueError, match="After pruning, no terms remain"):
        CountVectorizer(min_df=2).fit(as_bag(["ab cd", "ef"], 2))
    with pytest.raises(ValueError, match="max_df corresponds to < documents than min_df"):
        CountVectorizer(min_df=3, max_df=0.1).fit(as_bag(["ab cd", "ab", "cd"], 2))
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        CountVectorizer().transform(["ab"])
    with pytest.raises(ValueError, match="X has 3 features, but TfidfTransformer is expecting "
                                         "2 features"):
        TfidfTransformer().fit(da.ones((4, 2), chunks=2)).transform(da.ones((4, 3), chunks=2))

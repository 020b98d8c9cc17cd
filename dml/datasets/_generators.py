"""Seeded generators of chunked ``(X, y)`` Dask arrays, built chunk by chunk on the workers.

The small "model" of a data set (centroids, coefficients, rates, ...) is drawn once from
``random_state`` and shipped to the tasks as one graph key; chunk ``i`` draws its rows from its own
generator ``block_rng(seed, "<generator>", i)``. See :mod:`dml.datasets` for what is reproducible
across chunkings.
"""
from __future__ import annotations

import numbers
import operator

import dask.array as da
import numpy as np
from dask._task_spec import DataNode, Task, TaskRef
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from dml._blocks import block_rng, default_block_rows, seed_from
from dml._param_validation import check_scalar

__all__ = ["make_classification", "make_regression", "make_blobs", "make_counts"]

# ============================================================================================
# Generators: shared mechanics
# ============================================================================================

def _row_chunks(chunks, n_samples: int, n_features: int) -> tuple[int, ...]:
    """Normalise ``chunks`` (rows per chunk, or the row chunk sizes) to a tuple of sizes."""
    if chunks is None:
        # Same block size rule as dml uses when it cuts local data itself.
        chunks = default_block_rows(n_features)
    if isinstance(chunks, (numbers.Integral, np.integer)) and not isinstance(chunks, bool):
        rows = int(chunks)
        if rows < 1:
            raise ValueError(f"chunks must be a positive number of rows per chunk, got {rows}")
        full, rest = divmod(n_samples, rows)
        return (rows,) * full + ((rest,) if rest else ())
    if isinstance(chunks, (tuple, list)) and len(chunks) in (1, 2) and \
            isinstance(chunks[0], (tuple, list)):
        # Dask's per-dimension form ((rows...),) or ((rows...), (n_features,)).
        chunks = chunks[0]
    if isinstance(chunks, (tuple, list)) and chunks and all(
            isinstance(c, (numbers.Integral, np.integer)) and not isinstance(c, bool)
            for c in chunks):
        sizes = tuple(int(c) for c in chunks)
        if min(sizes) < 0 or sum(sizes) != n_samples:
            raise ValueError(
                f"chunks={tuple(chunks)!r} must be non-negative row chunk sizes that sum to "
                f"n_samples={n_samples} (they sum to {sum(sizes)}); or pass an int, the number "
                "of rows per chunk")
        return sizes
    raise TypeError(f"chunks must be None, an int (rows per chunk) or a tuple of row chunk "
                    f"sizes summing to n_samples; got {chunks!r}")


def _check_dtype(dtype):
    dtype = np.dtype(np.float64 if dtype is None else dtype)
    if dtype.kind not in "fiu":
        raise TypeError(f"dtype must be a numeric NumPy dtype, got {dtype}")
    return dtype


def _split_counts(totals: np.ndarray, sizes: tuple[int, ...], shuffle: bool,
                  rng: np.random.Generator) -> np.ndarray:
    """Per-chunk counts of each group, shape (n_chunks, n_groups), summing to ``totals``.

    Without shuffling the groups are laid out one after another, as in scikit-learn's
    ``shuffle=False`` output. With shuffling the rows are a random permutation of that layout,
    whose chunk counts follow a multivariate hypergeometric law: drawing them chunk by chunk keeps
    the global counts exact (scikit-learn's) without generating any row on the client.
    """
    totals = np.asarray(totals, dtype=np.int64)
    sizes_a = np.asarray(sizes, dtype=np.int64)
    if not shuffle:
        stop = np.cumsum(sizes_a)
        start = stop - sizes_a
        gstop = np.cumsum(totals)
        gstart = gstop - totals
        overlap = (np.minimum(stop[:, None], gstop[None, :])
                   - np.maximum(start[:, None], gstart[None, :]))
        return np.clip(overlap, 0, None)
    out = np.empty((len(sizes), len(totals)), dtype=np.int64)
    remaining = totals.copy()
    for i, m in enumerate(sizes):
        out[i] = rng.multivariate_hypergeometric(remaining, m)
        remaining -= out[i]
    return out


def _build(generator: str, chunk_fn, model: dict, seed: int, sizes: tuple[int, ...],
           per_chunk: list, x_width: int, x_dtype, y_tail: tuple[int, ...], y_dtype):
    """Assemble ``(X, y)`` Dask arrays: one model key, one generation task per chunk.

    Dask's public constructors (``from_delayed`` + ``concatenate``) would add two alias layers
    per output; building the graph directly keeps it to the generation task plus one ``getitem``
    per output chunk, like ``dask.array.random`` does.
    """
    token = tokenize(generator, chunk_fn.__name__, model, seed, sizes, per_chunk, x_dtype,
                     y_dtype)
    model_key = f"{generator}-model-{token}"
    gen_name = f"{generator}-{token}"
    x_name = f"{generator}-X-{token}"
    y_name = f"{generator}-y-{token}"
    gen_layer = {}
    x_layer = {}
    y_layer = {}
    for i, extra in enumerate(per_chunk):
        gkey = (gen_name, i)
        gen_layer[gkey] = Task(gkey, chunk_fn, TaskRef(model_key), seed, i, extra)
        xkey = (x_name, i, 0)
        x_layer[xkey] = Task(xkey, operator.getitem, TaskRef(gkey), 0)
        ykey = (y_name, i) + (0,) * len(y_tail)
        y_layer[ykey] = Task(ykey, operator.getitem, TaskRef(gkey), 1)
    layers = {model_key: {model_key: DataNode(model_key, model)}, gen_name: gen_layer,
              x_name: x_layer, y_name: y_layer}
    x_graph = HighLevelGraph(
        {k: layers[k] for k in (model_key, gen_name, x_name)},
        {model_key: set(), gen_name: {model_key}, x_name: {gen_name}})
    y_graph = HighLevelGraph(
        {k: layers[k] for k in (model_key, gen_name, y_name)},
        {model_key: set(), gen_name: {model_key}, y_name: {gen_name}})
    X = da.Array(x_graph, x_name, chunks=(sizes, (x_width,)),
                 meta=np.empty((0, x_width), dtype=x_dtype))
    y = da.Array(y_graph, y_name, chunks=(sizes,) + tuple((t,) for t in y_tail),
                 meta=np.empty((0,) + y_tail, dtype=y_dtype))
    return X, y


def _model_rng(seed: int, generator: str) -> np.random.Generator:
    # A stream of its own, distinct from every chunk's ``block_rng(seed, generator, i)``.
    return block_rng(seed, f"{generator}/model")


# ============================================================================================
# make_classification
# ============================================================================================

def _sample_without_replacement(n_population: int, n_samples: int,
                                rng: np.random.Generator) -> np.ndarray:
    """The law of ``sklearn.utils.random.sample_without_replacement(method="auto")``.

    The order matters: centroid ``k`` goes to class ``k % n_classes``. When (nearly) all
    vertices are taken, scikit-learn's reservoir sampling returns them (almost) in increasing
    order, which with the defaults always puts the two classes on opposite faces of the square
    (linearly separable centres, never an XOR layout). Drawing them in random order instead
    changes the difficulty of the generated problems, so the same rule is kept here.
    """
    ratio = n_samples / n_population
    if 0.01 < ratio < 0.99:
        return rng.permutation(n_population)[:n_samples]
    if ratio < 0.2:
        return rng.choice(n_population, size=n_samples, replace=False)
    out = np.arange(n_samples)
    for i in range(n_samples, n_population):
        j = int(rng.integers(0, i + 1))
        if j < n_samples:
            out[j] = i
    return out


def _hypercube_vertices(n_vertices: int, dimensions: int, rng: np.random.Generator):
    """Distinct binary vectors of length ``dimensions`` (scikit-learn's ``_generate_hypercube``)."""
    if dimensions > 30:
        return np.hstack([rng.integers(2, size=(n_vertices, dimensions - 30)),
                          _hypercube_vertices(n_vertices, 30, rng)])
    codes = _sample_without_replacement(2 ** dimensions, n_vertices, rng).astype(">u4")
    return np.unpackbits(codes.view(">u1")).reshape((-1, 32))[:, -dimensions:]


def _as_feature_vector(value, name: str, n_features: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        return np.full(n_features, float(arr))
    if arr.shape != (n_features,):
        raise ValueError(f"{name} must be a number or an array of length n_features="
                         f"{n_features}, got shape {arr.shape}")
    return arr.copy()


def _classification_chunk(model: dict, seed: int, index: int, counts: np.ndarray):
    rng = block_rng(seed, "make_classification", index)
    ni, nr, nrep = model["n_informative"], model["n_redundant"], model["n_repeated"]
    n_features, n_classes = model["n_features"], model["n_classes"]
    n = int(counts.sum())
    cluster = np.repeat(np.arange(len(counts)), counts)
    X = np.empty((n, n_features))
    X[:, :ni] = rng.standard_normal(size=(n, ni))
    # Rows are laid out cluster by cluster (scikit-learn's order) and shuffled at the end.
    stop = 0
    for k, c in enumerate(counts):
        start, stop = stop, stop + int(c)
        X[start:stop, :ni] = X[start:stop, :ni] @ model["A"][k] + model["centroids"][k]
    if nr:
        X[:, ni:ni + nr] = X[:, :ni] @ model["B"]
    if nrep:
        X[:, ni + nr:ni + nr + nrep] = X[:, model["repeated"]]
    n_random = n_features - ni - nr - nrep
    if n_random:
        X[:, n_features - n_random:] = rng.standard_normal(size=(n, n_random))
    y = (cluster % n_classes).astype(np.int64)
    if model["flip_y"] > 0:
        flip = rng.random(n) < model["flip_y"]
        y[flip] = rng.integers(n_classes, size=int(flip.sum()))
    X += model["shift"]
    X *= model["scale"]
    if model["shuffle"]:
        order = rng.permutation(n)
        X = X[order][:, model["feature_order"]]
        y = y[order]
    return X.astype(model["dtype"], copy=False), y


def make_classification(n_samples=100, n_features=20, *, n_informative=2, n_redundant=2,
                        n_repeated=0, n_classes=2, n_clusters_per_class=2, weights=None,
                        flip_y=0.01, class_sep=1.0, hypercube=True, shift=0.0, scale=1.0,
                        shuffle=True, random_state=None, chunks=None, dtype=None):
    """Generate a random n-class classification problem as chunked Dask arrays.

    scikit-learn's algorithm (``sklearn.datasets.make_classification``), generated chunk by chunk
    on the workers: clusters of normally distributed points around the vertices of a hypercube of
    side ``2 * class_sep`` in the informative subspace, each cluster with its own random
    covariance, ``n_clusters_per_class`` clusters per class; then redundant features (random
    linear combinations of the informative ones), repeated features, pure-noise features, label
    noise, shift and scale, and a random permutation of rows and features. The hypercube
    vertices are chosen with the same law as scikit-learn's (in increasing order when all
    ``2 ** n_informative`` are used, as with the defaults), which matters for how hard the
    problem is.

    The model (centroids, covariance transforms, mixing matrix, repeated indices, shift, scale,
    feature permutation) is drawn once from ``random_state``; each chunk draws its own rows. The
    number of rows per class (before ``flip_y``) is exactly scikit-learn's; with
    ``shuffle=False`` the rows are ordered by cluster as in scikit-learn, so ``y`` equals
    scikit-learn's ``y`` when ``flip_y=0``. The numbers themselves differ from scikit-learn's
    (another random stream), and a different ``chunks`` gives different rows with the same
    distribution.

    Parameters
    ----------
    n_samples : int, default=100
        Number of rows.
    n_features : int, default=20
        Total number of features: ``n_informative`` informative, ``n_redundant`` redundant,
        ``n_repeated`` duplicated and the rest pure noise.
    n_informative : int, default=2
        Number of informative features.
    n_redundant : int, default=2
        Number of random linear combinations of the informative features.
    n_repeated : int, default=0
        Number of copies of randomly chosen informative and redundant features.
    n_classes : int, default=2
        Number of classes.
    n_clusters_per_class : int, default=2
        Number of clusters per class; ``n_classes * n_clusters_per_class`` must not exceed
        ``2 ** n_informative``.
    weights : array-like of shape (n_classes,) or (n_classes - 1,), default=None
        Proportion of rows of each class (the last one is inferred when ``n_classes - 1`` are
        given). ``None`` means balanced classes.
    flip_y : float, default=0.01
        Fraction of rows whose label is replaced by a uniformly random class.
    class_sep : float, default=1.0
        Half the side of the hypercube: larger values separate the classes more.
    hypercube : bool, default=True
        Put the cluster centres on the vertices of a hypercube (else of a random polytope).
    shift : float, array of shape (n_features,) or None, default=0.0
        Added to every feature; ``None`` draws a random shift in ``[-class_sep, class_sep]``.
    scale : float, array of shape (n_features,) or None, default=1.0
        Multiplies every feature after shifting; ``None`` draws a random scale in ``[1, 101]``.
    shuffle : bool, default=True
        Shuffle the rows (within each chunk; the chunk's class counts are drawn so that the
        whole array is a random permutation) and the features.
    random_state : int, RandomState, Generator or None, default=None
        Seed of the data set. ``None`` draws a fresh seed (the graph then still computes the
        same numbers every time it is computed).
    chunks : int or tuple of int, default=None
        Rows per chunk, or the row chunk sizes (summing to ``n_samples``). ``None``: about 128 MiB
        per chunk.
    dtype : numpy dtype, default=float64
        dtype of ``X``.

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features)
        The samples, one column chunk, known row chunks.
    y : dask.array.Array of shape (n_samples,)
        The integer class labels (int64), chunked like ``X``.

    Examples
    --------
    >>> from dml.datasets import make_classification
    >>> X, y = make_classification(1000, 5, n_informative=3, random_state=0, chunks=300)
    >>> X.chunks
    ((300, 300, 300, 100), (5,))
    >>> X.shape, y.dtype
    ((1000, 5), dtype('int64'))
    >>> sorted(set(y.compute().tolist()))
    [0, 1]
    """
    n_samples = check_scalar(n_samples, "n_samples",
                             "make_classification", minimum=1, integer=True)
    n_features = check_scalar(n_features, "n_features",
                              "make_classification", minimum=1, integer=True)
    ni = check_scalar(n_informative, "n_informative",
                      "make_classification", minimum=1, integer=True)
    nr = check_scalar(n_redundant, "n_redundant", "make_classification", minimum=0, integer=True)
    nrep = check_scalar(n_repeated, "n_repeated", "make_classification", minimum=0, integer=True)
    n_classes = check_scalar(n_classes, "n_classes",
                             "make_classification", minimum=1, integer=True)
    ncpc = check_scalar(n_clusters_per_class, "n_clusters_per_class",
                        "make_classification", minimum=1, integer=True)
    flip_y = check_scalar(flip_y, "flip_y", "make_classification", minimum=0.0)
    if flip_y > 1:
        raise ValueError(f"flip_y must be in [0, 1], got {flip_y}")
    class_sep = check_scalar(class_sep, "class_sep",
                             "make_classification", minimum=0.0, closed="neither")
    if ni + nr + nrep > n_features:
        raise ValueError(
            f"n_informative + n_redundant + n_repeated = {ni + nr + nrep} exceeds n_features="
            f"{n_features}; lower them or raise n_features")
    if ni < np.log2(n_classes * ncpc):
        raise ValueError(
            f"n_classes({n_classes}) * n_clusters_per_class({ncpc}) must be smaller or equal "
            f"2**n_informative({ni})={2 ** ni}; raise n_informative")
    if weights is None:
        weights_ = np.full(n_classes, 1.0 / n_classes)
    else:
        w = np.asarray(weights, dtype=np.float64).ravel()
        if len(w) not in (n_classes, n_classes - 1):
            raise ValueError(f"weights has {len(w)} entries; give n_classes={n_classes} "
                             f"(or n_classes - 1) class proportions")
        weights_ = np.append(w, 1.0 - w.sum()) if len(w) == n_classes - 1 else w
        if not np.all(np.isfinite(weights_)) or np.any(weights_ < 0) or \
                weights_.sum() > 1 + 1e-9:
            raise ValueError(f"weights must be non-negative proportions summing to at most 1, "
                             f"got {list(weights_)}")
    sizes = _row_chunks(chunks, n_samples, n_features)
    dtype = _check_dtype(dtype)
    seed = seed_from(random_state)

    # Rows per cluster: scikit-learn's rule, remainder spread round-robin.
    n_clusters = n_classes * ncpc
    per_cluster = np.array([int(n_samples * weights_[k % n_classes] / ncpc)
                            for k in range(n_clusters)], dtype=np.int64)
    for i in range(n_samples - int(per_cluster.sum())):
        per_cluster[i % n_clusters] += 1
    if per_cluster.sum() != n_samples:
        raise ValueError(f"weights {list(weights_)} ask for more than n_samples rows")

    rng = _model_rng(seed, "make_classification")
    centroids = _hypercube_vertices(n_clusters, ni, rng).astype(np.float64)
    centroids *= 2 * class_sep
    centroids -= class_sep
    if not hypercube:
        centroids *= rng.uniform(size=(n_clusters, 1))
        centroids *= rng.uniform(size=(1, ni))
    A = 2 * rng.uniform(size=(n_clusters, ni, ni)) - 1
    B = 2 * rng.uniform(size=(ni, nr)) - 1
    repeated = ((ni + nr - 1) * rng.uniform(size=nrep) + 0.5).astype(np.intp)
    shift_ = ((2 * rng.uniform(size=n_features) - 1) * class_sep if shift is None
              else _as_feature_vector(shift, "shift", n_features))
    scale_ = (1 + 100 * rng.uniform(size=n_features) if scale is None
              else _as_feature_vector(scale, "scale", n_features))
    feature_order = rng.permutation(n_features) if shuffle else np.arange(n_features)
    counts = _split_counts(per_cluster, sizes, shuffle, rng)
    model = dict(n_features=n_features, n_informative=ni, n_redundant=nr, n_repeated=nrep,
                 n_classes=n_classes, centroids=centroids, A=A, B=B, repeated=repeated,
                 flip_y=flip_y, shift=shift_, scale=scale_, shuffle=bool(shuffle),
                 feature_order=feature_order, dtype=dtype)
    return _build("make_classification", _classification_chunk, model, seed, sizes,
                  list(counts), n_features, dtype, (), np.int64)


# ============================================================================================
# make_regression
# ============================================================================================

def _regression_chunk(model: dict, seed: int, index: int, n: int):
    rng = block_rng(seed, "make_regression", index)
    X = rng.standard_normal(size=(n, model["n_features"]))
    y = X @ model["coef"] + model["bias"]
    if model["noise"] > 0:
        y += rng.normal(scale=model["noise"], size=y.shape)
    if model["squeeze"]:
        y = y[:, 0]
    return X.astype(model["dtype"], copy=False), y


def make_regression(n_samples=100, n_features=100, *, n_informative=10, n_targets=1, bias=0.0,
                    effective_rank=None, tail_strength=0.5, noise=0.0, shuffle=True,
                    coef=False, random_state=None, chunks=None, dtype=None):
    """Generate a random linear regression problem as chunked Dask arrays.

    As ``sklearn.datasets.make_regression``: ``X`` is standard normal, the ground-truth
    coefficients are zero except for ``n_informative`` features drawn uniformly in ``[0, 100)``,
    and ``y = X @ coef + bias + noise``. The coefficients are drawn once from ``random_state``;
    each chunk draws its own rows and noise. With ``shuffle=True`` the informative features are
    at random positions (scikit-learn permutes the features; since the features of ``X`` are
    i.i.d., permuting the coefficients is the same law). Row order is already random.

    Parameters
    ----------
    n_samples : int, default=100
        Number of rows.
    n_features : int, default=100
        Number of features.
    n_informative : int, default=10
        Number of features with a non-zero coefficient (at most ``n_features``).
    n_targets : int, default=1
        Number of regression targets; ``y`` is 1-D when it is 1.
    bias : float, default=0.0
        Intercept of the linear model.
    effective_rank : None
        Only ``None`` (well-conditioned ``X``) is supported: a low-rank ``X`` needs a global
        construction across chunks. A number raises ``NotImplementedError``.
    tail_strength : float, default=0.5
        Ignored (it only matters with ``effective_rank``), accepted for scikit-learn
        compatibility.
    noise : float, default=0.0
        Standard deviation of the Gaussian noise added to ``y``.
    shuffle : bool, default=True
        Put the informative features at random positions (else the first ``n_informative``).
    coef : bool, default=False
        Also return the ground-truth coefficients.
    random_state : int, RandomState, Generator or None, default=None
        Seed of the data set.
    chunks : int or tuple of int, default=None
        Rows per chunk, or the row chunk sizes (summing to ``n_samples``). ``None``: about 128 MiB
        per chunk.
    dtype : numpy dtype, default=float64
        dtype of ``X`` (``y`` is computed in float64).

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features)
    y : dask.array.Array of shape (n_samples,) or (n_samples, n_targets)
    coef : ndarray of shape (n_features,) or (n_features, n_targets)
        The ground-truth coefficients (NumPy), only when ``coef=True``.

    Examples
    --------
    >>> from dml.datasets import make_regression
    >>> X, y, w = make_regression(400, 4, n_informative=2, coef=True, random_state=0,
    ...                           chunks=100)
    >>> X.numblocks, int((w != 0).sum())
    ((4, 1), 2)
    >>> bool(abs(y - X @ w).max().compute() < 1e-9)
    True
    """
    n_samples = check_scalar(n_samples, "n_samples", "make_regression", minimum=1, integer=True)
    n_features = check_scalar(n_features, "n_features", "make_regression", minimum=1, integer=True)
    n_informative = min(check_scalar(n_informative, "n_informative",
                                     "make_regression", minimum=0, integer=True), n_features)
    n_targets = check_scalar(n_targets, "n_targets", "make_regression", minimum=1, integer=True)
    bias = check_scalar(bias, "bias", "make_regression", closed="neither")
    noise = check_scalar(noise, "noise", "make_regression", minimum=0.0)
    if effective_rank is not None:
        raise NotImplementedError(
            "make_regression(effective_rank=...) is not supported by dml.datasets: a low-rank X "
            "with a singular-value profile is built from a global factorisation, which cannot be "
            "generated chunk by chunk. Use effective_rank=None, or build a small data set with "
            "sklearn.datasets.make_regression and wrap it with dask.array.from_array.")
    sizes = _row_chunks(chunks, n_samples, n_features)
    dtype = _check_dtype(dtype)
    seed = seed_from(random_state)

    rng = _model_rng(seed, "make_regression")
    ground_truth = np.zeros((n_features, n_targets))
    ground_truth[:n_informative] = 100 * rng.uniform(size=(n_informative, n_targets))
    if shuffle:
        ground_truth = ground_truth[rng.permutation(n_features)]
    model = dict(n_features=n_features, coef=ground_truth, bias=bias, noise=noise,
                 squeeze=n_targets == 1, dtype=dtype)
    y_tail = () if n_targets == 1 else (n_targets,)
    X, y = _build("make_regression", _regression_chunk, model, seed, sizes, list(sizes),
                  n_features, dtype, y_tail, np.float64)
    if coef:
        return X, y, np.squeeze(ground_truth)
    return X, y


# ============================================================================================
# make_blobs
# ============================================================================================

def _blobs_chunk(model: dict, seed: int, index: int, counts: np.ndarray):
    rng = block_rng(seed, "make_blobs", index)
    centers, std = model["centers"], model["std"]
    X = np.concatenate([rng.normal(loc=centers[k], scale=std[k], size=(int(c), centers.shape[1]))
                        for k, c in enumerate(counts)])
    y = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    if model["shuffle"]:
        order = rng.permutation(len(y))
        X, y = X[order], y[order]
    return X.astype(model["dtype"], copy=False), y


def make_blobs(n_samples=100, n_features=2, *, centers=None, cluster_std=1.0,
               center_box=(-10.0, 10.0), shuffle=True, random_state=None, return_centers=False,
               chunks=None, dtype=None):
    """Generate isotropic Gaussian blobs for clustering as chunked Dask arrays.

    As ``sklearn.datasets.make_blobs`` with an integer ``n_samples``: the centres are drawn once
    (uniformly in ``center_box``) unless given, the rows are split equally between the centres
    (the first ``n_samples % n_centers`` centres get one more, scikit-learn's counts), and each
    chunk draws its own points. With ``shuffle=False`` the rows are ordered by centre, so ``y``
    equals scikit-learn's.

    Parameters
    ----------
    n_samples : int, default=100
        Number of rows. (A per-centre list of counts is not supported.)
    n_features : int, default=2
        Number of features; ignored when ``centers`` is an array.
    centers : int or array of shape (n_centers, n_features), default=None
        Number of centres to draw (3 when ``None``) or the centres themselves.
    cluster_std : float or array of shape (n_centers,), default=1.0
        Standard deviation of each blob.
    center_box : tuple of float (min, max), default=(-10.0, 10.0)
        Box in which random centres are drawn.
    shuffle : bool, default=True
        Shuffle the rows (within each chunk; chunk counts are drawn so that the whole array is a
        random permutation).
    random_state : int, RandomState, Generator or None, default=None
        Seed of the data set.
    return_centers : bool, default=False
        Also return the centres (NumPy).
    chunks : int or tuple of int, default=None
        Rows per chunk, or the row chunk sizes (summing to ``n_samples``).
    dtype : numpy dtype, default=float64
        dtype of ``X``.

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features)
    y : dask.array.Array of shape (n_samples,)
        The blob of each row (int64).
    centers : ndarray of shape (n_centers, n_features)
        Only when ``return_centers=True``.

    Examples
    --------
    >>> from dml.datasets import make_blobs
    >>> X, y, centers = make_blobs(90, 2, centers=3, random_state=0, return_centers=True,
    ...                            chunks=(40, 50))
    >>> X.chunks, centers.shape
    (((40, 50), (2,)), (3, 2))
    >>> import numpy as np
    >>> np.bincount(y.compute()).tolist()
    [30, 30, 30]
    """
    if not isinstance(n_samples, (numbers.Integral, np.integer)) or isinstance(n_samples, bool):
        raise TypeError("dml.datasets.make_blobs supports an integer n_samples only (rows are "
                        f"split equally between the centres); got {n_samples!r}")
    n_samples = check_scalar(n_samples, "n_samples", "make_blobs", minimum=1, integer=True)
    seed = seed_from(random_state)
    rng = _model_rng(seed, "make_blobs")
    if centers is None:
        centers = 3
    if isinstance(centers, (numbers.Integral, np.integer)) and not isinstance(centers, bool):
        n_centers = check_scalar(centers, "centers", "make_blobs", minimum=1, integer=True)
        n_features = check_scalar(n_features, "n_features", "make_blobs", minimum=1, integer=True)
        lo, hi = (check_scalar(b, "center_box",
                               "make_blobs", closed="neither") for b in center_box)
        if not lo < hi:
            raise ValueError(f"center_box must be (min, max) with min < max, got {center_box}")
        centers_ = rng.uniform(lo, hi, size=(n_centers, n_features))
    else:
        centers_ = np.asarray(centers, dtype=np.float64)
        if centers_.ndim != 2 or centers_.shape[0] < 1 or centers_.shape[1] < 1:
            raise ValueError(f"centers must be an int or a 2-D array (n_centers, n_features), "
                             f"got shape {centers_.shape}")
        if not np.all(np.isfinite(centers_)):
            raise ValueError("centers must be finite")
        n_centers, n_features = centers_.shape
    std = np.asarray(cluster_std, dtype=np.float64)
    if std.ndim == 0:
        std = np.full(n_centers, float(std))
    if std.shape != (n_centers,):
        raise ValueError(f"cluster_std must be a number or have one entry per centre "
                         f"({n_centers}), got shape {std.shape}")
    if not np.all(np.isfinite(std)) or np.any(std < 0):
        raise ValueError(f"cluster_std must be non-negative, got {std.tolist()}")
    sizes = _row_chunks(chunks, n_samples, n_features)
    dtype = _check_dtype(dtype)

    per_center = np.full(n_centers, n_samples // n_centers, dtype=np.int64)
    per_center[:n_samples % n_centers] += 1
    counts = _split_counts(per_center, sizes, shuffle, rng)
    model = dict(centers=centers_, std=std, shuffle=bool(shuffle), dtype=dtype)
    X, y = _build("make_blobs", _blobs_chunk, model, seed, sizes, list(counts), n_features,
                  dtype, (), np.int64)
    if return_centers:
        return X, y, centers_.copy()
    return X, y


# ============================================================================================
# make_counts
# ============================================================================================

def _counts_chunk(model: dict, seed: int, index: int, counts: np.ndarray):
    rng = block_rng(seed, "make_counts", index)
    y = rng.permutation(np.repeat(np.arange(len(counts), dtype=np.int64), counts))
    X = rng.poisson(model["rates"][y])
    return X.astype(model["dtype"], copy=False), y


def make_counts(n_samples=100, n_features=20, n_classes=3, *, random_state=None, chunks=None,
                dtype=None, return_rates=False):
    """Generate class-dependent Poisson counts (bag-of-words like) as chunked Dask arrays.

    For multinomial / Bernoulli naive Bayes demos and benchmarks. Each class ``c`` has a vector
    of Poisson rates ``rates[c] = base * exp(N(0, 1))`` where the shared ``base`` profile is
    Gamma(0.5, 1) distributed (a few frequent "words", many rare ones) and the log-normal factor
    makes each class favour its own features. ``X[i, j] ~ Poisson(rates[y[i], j])``
    independently, so given the row total the counts are multinomial with class-dependent
    probabilities (``MultinomialNB``'s model) and ``X > 0`` is Bernoulli per feature
    (``BernoulliNB``'s). Classes are balanced (the first ``n_samples % n_classes`` get one more
    row) and rows are in random order. The rates are drawn once from ``random_state``; each chunk
    draws its own rows.

    Parameters
    ----------
    n_samples : int, default=100
        Number of rows.
    n_features : int, default=20
        Number of count features.
    n_classes : int, default=3
        Number of classes.
    random_state : int, RandomState, Generator or None, default=None
        Seed of the data set.
    chunks : int or tuple of int, default=None
        Rows per chunk, or the row chunk sizes (summing to ``n_samples``).
    dtype : numpy dtype, default=float64
        dtype of ``X`` (the values are whole numbers).
    return_rates : bool, default=False
        Also return the Poisson rates, an array of shape (n_classes, n_features).

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features)
    y : dask.array.Array of shape (n_samples,)
        Class labels (int64).
    rates : ndarray of shape (n_classes, n_features)
        Only when ``return_rates=True``.

    Examples
    --------
    >>> from dml.datasets import make_counts
    >>> X, y = make_counts(300, 10, n_classes=3, random_state=0, chunks=100)
    >>> Xc = X.compute()
    >>> bool((Xc >= 0).all() and (Xc == Xc.round()).all()), X.dtype
    (True, dtype('float64'))
    """
    n_samples = check_scalar(n_samples, "n_samples", "make_counts", minimum=1, integer=True)
    n_features = check_scalar(n_features, "n_features", "make_counts", minimum=1, integer=True)
    n_classes = check_scalar(n_classes, "n_classes", "make_counts", minimum=1, integer=True)
    sizes = _row_chunks(chunks, n_samples, n_features)
    dtype = _check_dtype(dtype)
    seed = seed_from(random_state)
    rng = _model_rng(seed, "make_counts")
    base = rng.gamma(0.5, 1.0, size=n_features)
    rates = base * np.exp(rng.standard_normal(size=(n_classes, n_features)))
    per_class = np.full(n_classes, n_samples // n_classes, dtype=np.int64)
    per_class[:n_samples % n_classes] += 1
    # Rows are permuted inside each chunk, so the chunk counts follow the shuffled law.
    counts = _split_counts(per_class, sizes, True, rng)
    model = dict(rates=rates, dtype=dtype)
    X, y = _build("make_counts", _counts_chunk, model, seed, sizes, list(counts), n_features,
                  dtype, (), np.int64)
    if return_rates:
        return X, y, rates.copy()
    return X, y

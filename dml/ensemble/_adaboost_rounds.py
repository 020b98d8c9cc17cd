"""AdaBoost's rounds on the held bins: the row weights kept beside the binned blocks, in the
same groups, and every round's error and reweighting computed there from the tree's node
assignments (no pass over X, a task per group instead of several per block).

Used by :class:`dml.ensemble.AdaBoostClassifier` with dml's own tree on Dask input. The numbers
are those of the round-by-round path (the tree fitted from X and its predictions compared with
y): the same per-row arithmetic, and the weighted error and the weights' total summed as per-block
sums (in X's blocks) added in block order (:func:`block_sums_total`), on both paths.
"""
from __future__ import annotations

from dataclasses import replace

import dask
import numpy as np
from dask import delayed


def block_sums_total(per_block) -> float:
    """The sum of per-block sums, added in block order: the one way both AdaBoost paths total
    the weighted error and the weights (so they give the same numbers bit for bit)."""
    return float(np.sum(np.asarray(per_block, dtype=np.float64)))


def _weights(wgroup, s):
    """The group's row weights, held unnormalised, divided by their total ``s`` (None: as
    they are), as the other path's ``w / s``."""
    return wgroup if s is None else tuple(b / s for b in wgroup)


def _wrong(group, assign, node_class):
    """Per block, whether the round's tree misclassifies each row (from the leaf each row
    reached while the tree grew: the class of highest value there, against the encoded y)."""
    return [node_class[a[:, 0]] != y for (_, y, _), a in zip(group, assign)]


def round_error(group, assign, wgroup, s, node_class):
    """Per block of the group: (weighted error, weight total) of the round's tree."""
    w = _weights(wgroup, s)
    return [(np.sum(b * bad), np.sum(b)) for b, bad in zip(w, _wrong(group, assign, node_class))]


def boosted(group, assign, wgroup, s, node_class, alpha):
    """The group's weights with the misclassified rows' multiplied by ``exp(alpha)`` (rows of
    weight 0 stay 0), not yet normalised: ``(per-block weights, per-block sums)``."""
    w = tuple(b * np.exp(alpha * bad * (b > 0))
              for b, bad in zip(_weights(wgroup, s), _wrong(group, assign, node_class)))
    return w, [np.sum(b) for b in w]


def with_round_weights(group, class_weight, wgroup, s, n_rows):
    """The binned blocks with this round's tree weights: the AdaBoost weights times the row
    count (dml's trees count ``min_samples_*`` in weighted rows) times the class weights."""
    out = []
    for (bins, y, _), b in zip(group, _weights(wgroup, s)):
        w = np.asarray(b * n_rows, dtype=np.float64).ravel()
        if class_weight is not None:
            w = w * class_weight[y]
        out.append((bins, y, w))
    return tuple(out)


class HeldRounds:
    """The AdaBoost weights held in the groups of the binned data ``bins``
    (:class:`dml.tree._model.BinnedData`), and the round steps over them.

    ``w`` is the normalised weight vector as a Dask array (any row chunks); it is cut into
    X's blocks (``chunks``) and grouped like the bins. The weights (8 bytes a row) are always
    persisted, as the other path persists its weight array: on data streamed from storage
    (bins not held) a round's weights would otherwise be recomputed from every earlier
    round's trees. They are held unnormalised; ``scale`` is the total they are divided by
    where they are read (None: as they are), kept here rather than in a task per group."""

    def __init__(self, bins, w, chunks):
        self.bins = bins
        blocks = w.rechunk((tuple(chunks),)).to_delayed().ravel().tolist()
        b = bins.bounds
        groups = [delayed(_as_vectors, pure=True)(*blocks[lo:hi])
                  for lo, hi in zip(b[:-1], b[1:])]
        self.weights = list(dask.persist(*groups))
        self.scale = None

    def round_bins(self, n_rows):
        """The bins with the current weights as the tree's row weights."""
        groups = [delayed(with_round_weights, pure=True)(g, self.bins.class_weight, wg,
                                                             self.scale, n_rows)
                  for g, wg in zip(self.bins.groups, self.weights)]
        if self.bins.keep:
            groups = list(dask.persist(*groups))
        return replace(self.bins, groups=groups)

    def error(self, assign, node_class):
        """The round's weighted error and weight total (sums in block order)."""
        per_group = dask.compute(*[delayed(round_error, pure=True)(g, a, wg, self.scale, node_class)
                                   for g, a, wg in zip(self.bins.groups, assign, self.weights)])
        per_block = [p for ps in per_group for p in ps]
        return (block_sums_total([p[0] for p in per_block]),
                block_sums_total([p[1] for p in per_block]))

    def reweight(self, assign, node_class, alpha) -> float:
        """Boost the misclassified rows' weights; returns their new total, by which they are
        then normalised (:meth:`normalise`)."""
        out = [delayed(boosted, pure=True, nout=2)(g, a, wg, self.scale, node_class, alpha)
               for g, a, wg in zip(self.bins.groups, assign, self.weights)]
        self.weights = list(dask.persist(*[o[0] for o in out]))
        self.scale = None
        sums = dask.compute(*[o[1] for o in out])
        return block_sums_total([s for ss in sums for s in ss])

    def normalise(self, s):
        """Divide the weights by ``s`` (where they are next read)."""
        self.scale = s


def _as_vectors(*blocks):
    return tuple(np.asarray(b, dtype=np.float64).ravel() for b in blocks)

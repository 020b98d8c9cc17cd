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

from dml._block_groups import collect


def block_sums_total(per_block) -> float:
    """The sum of per-block sums, added in block order: the one way both AdaBoost paths total
    the weighted error and the weights (so they give the same numbers bit for bit)."""
    return float(np.sum(np.asarray(per_block, dtype=np.float64)))


def _weights(wgroup):
    """The group's row weights: ``(per-block weights, divisor)`` held unnormalised with the
    total they are to be divided by (None: as they are), as the other path's ``w / s``."""
    w, s = wgroup
    return w if s is None else tuple(b / s for b in w)


def _wrong(group, assign, node_class):
    """Per block, whether the round's tree misclassifies each row (from the leaf each row
    reached while the tree grew: the class of highest value there, against the encoded y)."""
    return [node_class[a[:, 0]] != y for (_, y, _), a in zip(group, assign)]


def round_error(group, assign, wgroup, node_class):
    """Per block of the group: (weighted error, weight total) of the round's tree."""
    w = _weights(wgroup)
    return [(np.sum(b * bad), np.sum(b)) for b, bad in zip(w, _wrong(group, assign, node_class))]


def boosted(group, assign, wgroup, node_class, alpha):
    """The group's weights with the misclassified rows' multiplied by ``exp(alpha)`` (rows of
    weight 0 stay 0), not yet normalised: ``((per-block weights, None), per-block sums)``."""
    w = tuple(b * np.exp(alpha * bad * (b > 0))
              for b, bad in zip(_weights(wgroup), _wrong(group, assign, node_class)))
    return (w, None), [np.sum(b) for b in w]


def normalised(wgroup, s):
    """The group's weights to be divided by ``s`` (done where they are next read)."""
    return (wgroup[0], s)


def with_round_weights(group, class_weight, wgroup, n_rows):
    """The binned blocks with this round's tree weights: the AdaBoost weights times the row
    count (dml's trees count ``min_samples_*`` in weighted rows) times the class weights."""
    out = []
    for (bins, y, _), b in zip(group, _weights(wgroup)):
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
    round's trees."""

    def __init__(self, bins, w, chunks):
        self.bins = bins
        blocks = w.rechunk((tuple(chunks),)).to_delayed().ravel().tolist()
        b = bins.bounds
        groups = [delayed(_pair_none, pure=True)(delayed(collect, pure=True)(*blocks[lo:hi]))
                  for lo, hi in zip(b[:-1], b[1:])]
        self.weights = list(dask.persist(*groups))

    def round_bins(self, n_rows):
        """The bins with the current weights as the tree's row weights."""
        groups = [delayed(with_round_weights, pure=True)(g, self.bins.class_weight, wg, n_rows)
                  for g, wg in zip(self.bins.groups, self.weights)]
        if self.bins.keep:
            groups = list(dask.persist(*groups))
        return replace(self.bins, groups=groups)

    def error(self, assign, node_class):
        """The round's weighted error and weight total (sums in block order)."""
        per_group = dask.compute(*[delayed(round_error, pure=True)(g, a, wg, node_class)
                                   for g, a, wg in zip(self.bins.groups, assign, self.weights)])
        per_block = [p for ps in per_group for p in ps]
        return (block_sums_total([p[0] for p in per_block]),
                block_sums_total([p[1] for p in per_block]))

    def reweight(self, assign, node_class, alpha) -> float:
        """Boost the misclassified rows' weights; returns their new total, by which they are
        then normalised (:meth:`normalise`)."""
        out = [delayed(boosted, pure=True, nout=2)(g, a, wg, node_class, alpha)
               for g, a, wg in zip(self.bins.groups, assign, self.weights)]
        self.weights = list(dask.persist(*[o[0] for o in out]))
        sums = dask.compute(*[o[1] for o in out])
        return block_sums_total([s for ss in sums for s in ss])

    def normalise(self, s):
        """Divide the weights by ``s`` (where they are next read)."""
        self.weights = list(dask.persist(*[delayed(normalised, pure=True)(wg, s)
                                           for wg in self.weights]))


def _pair_none(blocks):
    return (tuple(np.asarray(b, dtype=np.float64).ravel() for b in blocks), None)

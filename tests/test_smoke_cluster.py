import numpy as np
import dask.array as da
from distributed import get_client

from dml._blocks import as_blocks


def test_blocks_sum_on_both_clusters(client):
    assert get_client() is client
    X = da.from_array(np.arange(60.0).reshape(30, 2), chunks=7)
    y = da.from_array(np.arange(30) % 2, chunks=11)
    out = as_blocks(X, y).map_reduce(lambda x, y, w: (x.sum(0), y.sum(), len(y)))
    np.testing.assert_array_equal(out[0], np.arange(60.0).reshape(30, 2).sum(0))
    assert out[1] == 15 and out[2] == 30

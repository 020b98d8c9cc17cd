"""What the workers run for :mod:`dml.recommender._mf`: ratings as frames, predictions.

Apart from the estimator, so that a worker unpickling one imports pandas and the cell
functions, not scikit-learn (docs/cold_start.md).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dml.recommender._cells import predict_frame


def _array_frame(x, y, need_rating):
    frame = {"u": x[:, 0], "i": x[:, 1]}
    if need_rating:
        frame["r"] = np.asarray(x[:, 2] if y is None else y, dtype=np.float64)
    return pd.DataFrame(frame)


def _predict_array(x, uids, iids, P, Q, bu, bi, mu):
    return predict_frame(pd.DataFrame({"u": x[:, 0], "i": x[:, 1]}), "u", "i", uids, iids,
                          P, Q, bu, bi, mu)


def _rename(df, want):
    df = df[want]
    df.columns = ["u", "i", "r"][:len(want)]
    return df


def _predict_series(df, user_col, item_col, uids, iids, P, Q, bu, bi, mu):
    return pd.Series(predict_frame(df, user_col, item_col, uids, iids, P, Q, bu, bi, mu),
                     index=df.index)

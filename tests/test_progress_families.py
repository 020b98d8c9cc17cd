"""Progress lines and INFO log records of the random forest, bagging and the searches.

The same displays as the SGD models' and KMeans' (``verbose`` / ``progress``, see
dml/optim/progress.py): one plain line per step when stderr is not a terminal, a record per step
for a callable, and every step logged at INFO so that ``dml -v`` shows it in a batch job's log.
"""
from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.naive_bayes import GaussianNB as SkGaussianNB

from conftest import QUICK_ON_PROCESS_CLUSTER

from dml.ensemble import (BaggingClassifier, BaggingRegressor, RandomForestClassifier,
                          RandomForestRegressor)
from dml.model_selection import GridSearchCV, RandomizedSearchCV
from dml.naive_bayes import GaussianNB


@pytest.fixture(scope="module")
def data():
    X = np.random.default_rng(0).normal(size=(300, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    return X, y, da.from_array(X, chunks=(100, 4)), da.from_array(y, chunks=100)


# Quick tier: the process cluster; the in-process cluster with the slow tests.
@pytest.mark.parametrize("client", QUICK_ON_PROCESS_CLUSTER, indirect=True)
def test_forest_reports_every_level_and_every_group_of_trees(client, data, capsys, caplog):
    _, _, Xd, yd = data
    records = []
    RandomForestClassifier(n_estimators=5, max_depth=3, trees_per_pass=3, random_state=0,
                           progress=records.append).fit(Xd, yd)
    finished = [r["epoch"] for r in records if "detail" not in r]
    assert finished == [3, 5] and all(r["unit"] == "tree" for r in records)
    levels = [r["detail"] for r in records if "detail" in r]
    # Every level of each group, root first; the trees finished so far stay the count.
    assert levels[0].startswith("trees 1-3: level 0 grown") and len(levels) >= 4
    assert any(d.startswith("trees 4-5: level") for d in levels)
    assert [r["epoch"] for r in records if r.get("detail", "").startswith("trees 4-5")] \
        == [3] * sum(d.startswith("trees 4-5") for d in levels)
    with caplog.at_level("INFO", logger="dml.ensemble"):
        RandomForestRegressor(n_estimators=2, max_depth=2, random_state=0,
                              verbose=1).fit(Xd, yd.astype(float))
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("RandomForestRegressor [")]
    assert "\r" not in err and lines and "tree 2/2" in lines[-1], err
    assert any("RandomForestRegressor trees 1-2: level 1 grown" in r.getMessage()
               for r in caplog.records)
    # Hyper-parameters like any other: cloned, and validated at fit.
    assert clone(RandomForestClassifier(verbose=1)).get_params()["verbose"] == 1
    with pytest.raises(TypeError, match="progress must be"):
        RandomForestClassifier(n_estimators=1, progress=5).fit(Xd, yd)


def test_bagging_reports_each_member(client, data, capsys, caplog):
    X, y, Xd, yd = data
    records = []
    BaggingClassifier(n_estimators=3, random_state=0, progress=records.append).fit(Xd, yd)
    assert records == [{"epoch": k, "unit": "member"} for k in (1, 2, 3)]
    with caplog.at_level("INFO", logger="dml.ensemble"):
        BaggingRegressor(n_estimators=2, random_state=0, verbose=1).fit(X, y.astype(float))
    err = capsys.readouterr().err
    assert "BaggingRegressor [" in err and "member 2/2" in err and "\r" not in err
    assert any(r.getMessage() == "BaggingRegressor: 2/2 members done" for r in caplog.records)


def test_searches_report_each_fit(client, data, capsys, caplog):
    X, y, Xd, yd = data
    grid = {"var_smoothing": [1e-9, 1e-3]}
    records = []
    # Both of the searches' paths: dml estimator on Dask data, scikit-learn's on NumPy.
    GridSearchCV(GaussianNB(), grid, cv=3, progress=records.append).fit(Xd, yd)
    assert records == [{"epoch": k, "unit": "fit"} for k in range(1, 7)]
    records.clear()
    RandomizedSearchCV(SkGaussianNB(), grid, n_iter=2, cv=2, random_state=0,
                       progress=records.append).fit(X, y)
    assert [r["epoch"] for r in records] == [1, 2, 3, 4]
    with caplog.at_level("INFO", logger="dml.model_selection"):
        GridSearchCV(GaussianNB(), grid, cv=2, verbose=1).fit(Xd, yd)
    err = capsys.readouterr()
    lines = [ln for ln in err.err.splitlines() if ln.startswith("GridSearchCV [")]
    assert len(lines) == 4 and "fit 4/4" in lines[-1] and "\r" not in err.err
    assert "Fitting 2 folds for each of 2 candidates" in err.out
    assert sum("GridSearchCV: " in r.getMessage() for r in caplog.records) == 4
    params = clone(GridSearchCV(GaussianNB(), grid, progress="text")).get_params()
    assert params["progress"] == "text"

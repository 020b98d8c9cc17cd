"""Linear SVM workload ``svm`` (issue 3): hinge-loss classifiers, test accuracy.

The ``logistic`` workload's data (:func:`benchmarks.workloads.logistic.linear_data`). dml fits
``LinearSVC(loss="hinge")`` (Newton's method on a smoothed hinge, C = 1); scikit-learn's reference
is its default ``LinearSVC()`` (squared hinge, liblinear's primal solver: its hinge-loss dual
solver does not finish in minutes on this size), plus ``SGDClassifier(loss="hinge")``; Spark's
``LinearSVC`` (hinge) with ``regParam = 1/n_train`` (scikit-learn's C = 1); dask-ml has no SVM, so
its row is ``Incremental(SGDClassifier(loss="hinge"))``.
"""
from __future__ import annotations

from benchmarks.registry import ACCURACY, Target, Workload, on_dask, on_numpy, register
from benchmarks.workloads.logistic import _spark_reg, incremental_sgd, linear_data, spark_classifier

register(Workload(
    name="svm",
    title="Linear SVM (hinge loss) on make_classification (1,000,000 × 50), test accuracy",
    build=linear_data,
    metric=ACCURACY,
    implementations={
        "dml": on_dask("dml.linear_model:LinearSVC", loss="hinge",
                       note="`dml.linear_model.LinearSVC(loss='hinge')`: Newton on a smoothed "
                            "hinge (μ = 1 → 0.01), one pass per iteration, on persisted Dask "
                            "arrays"),
        "dml-sqhinge": on_dask("dml.linear_model:LinearSVC",
                               note="`LinearSVC()` (squared hinge, exact Newton)"),
        "dml-sgd": on_dask("dml.linear_model:SGDClassifier", loss="hinge", average=True,
                           batch_size=256, max_iter=10, tol=None, random_state=0,
                           note="`SGDClassifier(loss='hinge', average=True, batch_size=256, "
                                "max_iter=10, tol=None, random_state=0)`: 10 epochs of "
                                "partition-parallel mini-batch SGD (Pegasos step 1/(α t))"),
        "sklearn": on_numpy("sklearn.svm:LinearSVC",
                            note="`sklearn.svm.LinearSVC()` (squared hinge, C=1, liblinear) on "
                                 "NumPy in the client process"),
        "sklearn-sgd": on_numpy("sklearn.linear_model:SGDClassifier", loss="hinge",
                                random_state=0),
        "dask-ml": incremental_sgd(
            "dask-ml has no SVM: `dask_ml.wrappers.Incremental(SGDClassifier(loss='hinge', "
            "random_state=0))`, one sequential pass over the blocks",
            loss="hinge", random_state=0),
        "spark": spark_classifier(
            "pyspark.ml.classification:LinearSVC", proba=False, regParam=_spark_reg,
            standardization=False, maxIter=100,
            note="`pyspark.ml.classification.LinearSVC(regParam=1/n_train, "
                 "standardization=False, maxIter=100)` (hinge) on a cached DataFrame"),
    },
    target=Target({"sklearn": 0.58, "spark": 1.0},
                  reference="issue 3: ≤ 8 s at accuracy ≥ 0.767 on 2 cores, where sklearn "
                            "LinearSVC took 13.7 s (0.7725) and Spark LinearSVC 16 s (0.7732)"),
))

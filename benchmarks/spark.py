"""The local Spark session of a benchmark run and the NumPy → cached DataFrame conversion.

Spark runs as ``local[2]`` next to the Dask cluster in the same Python process (the JVM is a
child process). Only imported when a Spark implementation is selected and ``pyspark`` is
installed (``pip install 'dml[spark]'``; needs Java 17+).
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import scipy.sparse

__all__ = ["session", "stop", "to_spark_frame", "describe", "MASTER", "DRIVER_MEMORY"]

MASTER = "local[2]"
#: The driver is also the executor in local mode: it caches the training DataFrame.
DRIVER_MEMORY = "6g"

_session = None


def session():
    """The run's SparkSession, started on first use."""
    global _session
    if _session is None:
        # The Python workers Spark may start must be this interpreter (same numpy/pandas).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        # pyspark 4.x warns on every pandas conversion that it does not fully support pandas 3;
        # plain float frames convert fine (same accuracy as scikit-learn on the same data).
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                                category=FutureWarning)

        _session = (SparkSession.builder.master(MASTER).appName("dml-benchmarks")
                    .config("spark.driver.memory", DRIVER_MEMORY)
                    .config("spark.ui.enabled", "false")
                    .config("spark.ui.showConsoleProgress", "false")
                    .config("spark.sql.execution.arrow.pyspark.enabled", "true")
                    .config("spark.sql.shuffle.partitions", "8")
                    .getOrCreate())
        _session.sparkContext.setLogLevel("ERROR")
    return _session


def stop() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None


def describe() -> str:
    """Spark settings, for the report header."""
    import ctypes.util

    # Spark's netlib looks for a native libblas.so.3 and otherwise uses its Java BLAS.
    blas = "native BLAS found" if ctypes.util.find_library("blas") else "Java BLAS (no libblas)"
    return f"{MASTER}, driver memory {DRIVER_MEMORY}, {blas}"


def to_spark_frame(X: np.ndarray, y: np.ndarray | None, n_partitions: int):
    """A cached DataFrame with ``features`` (VectorAssembler of X's columns) and ``label``."""
    import pandas as pd
    from pyspark.ml.feature import VectorAssembler

    spark = session()
    if scipy.sparse.issparse(X):
        return _sparse_frame(spark, X, y, n_partitions)
    cols = [f"x{j}" for j in range(X.shape[1])]
    pdf = pd.DataFrame(X, columns=cols, copy=False)
    if y is not None:
        pdf["label"] = y.astype(np.float64)
    df = spark.createDataFrame(pdf).repartition(n_partitions)
    del pdf
    keep = ["features"] + (["label"] if y is not None else [])
    assembled = (VectorAssembler(inputCols=cols, outputCol="features")
                 .transform(df).select(*keep).cache())
    assembled.count()  # materialise the cache now, not inside the first timed fit
    return assembled


def _sparse_frame(spark, X, y, n_partitions: int):
    """A cached DataFrame of ``SparseVector`` features (what HashingTF gives) from a CSR X.

    Written to a temporary libsvm file and read by Spark's own libsvm source: building a
    million SparseVector rows in Python would take far longer than any fit.
    """
    import atexit
    import shutil
    import tempfile

    from sklearn.datasets import dump_svmlight_file

    # Kept until the run ends: Spark re-reads the file if it ever drops a cached partition.
    folder = tempfile.mkdtemp(prefix="dml-bench-libsvm-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "data.libsvm")
    labels = np.zeros(X.shape[0]) if y is None else np.asarray(y, dtype=np.float64)
    dump_svmlight_file(scipy.sparse.csr_matrix(X), labels, path, zero_based=False)
    df = (spark.read.format("libsvm").option("numFeatures", str(X.shape[1])).load(path)
          .repartition(n_partitions))
    if y is None:
        df = df.select("features")
    df = df.cache()
    df.count()  # materialise the cache now, not inside the first timed fit
    return df

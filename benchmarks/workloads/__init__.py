"""Workload families; importing this package registers every workload.

To add a family, write a module here that calls :func:`benchmarks.registry.register` and import
it below (the import order is the order of the sections in ``RESULTS.md``).
"""
from benchmarks.workloads import naive_bayes  # noqa: F401
from benchmarks.workloads import kmeans  # noqa: F401
from benchmarks.workloads import one_pass  # noqa: F401
from benchmarks.workloads import logistic  # noqa: F401
from benchmarks.workloads import svm  # noqa: F401
from benchmarks.workloads import forest  # noqa: F401
from benchmarks.workloads import cv  # noqa: F401
from benchmarks.workloads import mlp  # noqa: F401
from benchmarks.workloads import mf  # noqa: F401
from benchmarks.workloads import pca  # noqa: F401
from benchmarks.workloads import gmm  # noqa: F401
from benchmarks.workloads import knn  # noqa: F401
from benchmarks.workloads import gbt  # noqa: F401
from benchmarks.workloads import text  # noqa: F401

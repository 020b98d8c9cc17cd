"""Side-by-side benchmarks of dml against scikit-learn, dask-ml and Spark MLlib.

Performance goals of dml live here, never as timed assertions in the tests. Run::

    python -m benchmarks.run --workloads nb_gaussian --repeat 5

Modules: :mod:`benchmarks.registry` (workloads × implementations and the adapters that make an
implementation one line), :mod:`benchmarks.data` (one dataset per workload in the form each
implementation needs), :mod:`benchmarks.spark` (the local Spark session),
:mod:`benchmarks.workloads` (one module per workload family), :mod:`benchmarks.report`
(``RESULTS.md``) and :mod:`benchmarks.run` (the command line and the timing loop).
"""

"""Multi-layer perceptrons trained by partition-parallel mini-batch SGD.

See docs/neural_network.md."""
from dml._lazy import attach as _attach

__all__ = ["MLPClassifier", "MLPRegressor"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "MLPClassifier": "dml.neural_network._multilayer_perceptron",
    "MLPRegressor": "dml.neural_network._multilayer_perceptron",
})

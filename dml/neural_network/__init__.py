"""Multi-layer perceptrons trained by partition-parallel mini-batch SGD.

See docs/neural_network.md."""
from dml.neural_network._multilayer_perceptron import MLPClassifier, MLPRegressor

__all__ = ["MLPClassifier", "MLPRegressor"]

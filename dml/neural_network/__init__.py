"""Multi-layer perceptrons trained by partition-parallel mini-batch SGD (SPEC §3)."""
from dml.neural_network._multilayer_perceptron import MLPClassifier, MLPRegressor

__all__ = ["MLPClassifier", "MLPRegressor"]

"""Linear models (see docs/linear_models.md).

* exact, one pass: :class:`LinearRegression`, :class:`Ridge`;
* exact second-order / quasi-Newton solvers over reduced gradients and Hessians, or SGD:
  :class:`LogisticRegression`, :class:`LinearSVC`;
* partition-parallel mini-batch SGD (:mod:`dml.optim`): :class:`SGDClassifier`,
  :class:`SGDRegressor`, :class:`Perceptron`, :class:`Lasso`, :class:`ElasticNet`.
"""
from dml._lazy import attach as _attach

__all__ = ["LinearRegression", "Ridge", "LogisticRegression", "LinearSVC", "SGDClassifier",
           "SGDRegressor", "Perceptron", "Lasso", "ElasticNet"]

# Imported on first use, so that a worker unpickling one of the package's kernels does not
# import the estimators and scikit-learn (docs/cold_start.md).
__getattr__, __dir__ = _attach(__name__, {
    "LinearRegression": "dml.linear_model._least_squares",
    "Ridge": "dml.linear_model._least_squares",
    "LogisticRegression": "dml.linear_model._logistic",
    "LinearSVC": "dml.linear_model._svm",
    "SGDClassifier": "dml.linear_model._sgd",
    "SGDRegressor": "dml.linear_model._sgd",
    "Perceptron": "dml.linear_model._sgd",
    "Lasso": "dml.linear_model._coordinate_descent",
    "ElasticNet": "dml.linear_model._coordinate_descent",
})

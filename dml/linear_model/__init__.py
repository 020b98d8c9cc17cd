"""Linear models (see docs/linear_models.md).

* exact, one pass: :class:`LinearRegression`, :class:`Ridge`;
* exact second-order / quasi-Newton solvers over reduced gradients and Hessians, or SGD:
  :class:`LogisticRegression`, :class:`LinearSVC`;
* partition-parallel mini-batch SGD (:mod:`dml.optim`): :class:`SGDClassifier`,
  :class:`SGDRegressor`, :class:`Perceptron`, :class:`Lasso`, :class:`ElasticNet`.
"""
from dml.linear_model._coordinate_descent import ElasticNet, Lasso
from dml.linear_model._least_squares import LinearRegression, Ridge
from dml.linear_model._logistic import LogisticRegression
from dml.linear_model._sgd import Perceptron, SGDClassifier, SGDRegressor
from dml.linear_model._svm import LinearSVC

__all__ = ["LinearRegression", "Ridge", "LogisticRegression", "LinearSVC", "SGDClassifier",
           "SGDRegressor", "Perceptron", "Lasso", "ElasticNet"]

"""The SGD engine's parts (no cluster) and its driver (threaded scheduler and real clusters)."""
import json
import math

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster

from dml._blocks import as_blocks, block_rng
from dml.optim import checkpoint as ckpt
from dml.optim.data import prepare
from dml.optim.engine import SGDConfig, epoch_plan, final_params, initial_state, train
from dml.optim.losses import LOSSES, get_loss
from dml.optim.optimizers import make_optimizer, update_average
from dml.optim.penalties import Penalty, make_penalty
from dml.optim.problem import Problem
from dml.optim.schedules import make_schedule, optimal_t0
from dml.optim.state import TrainState
from dml.optim.training import (DivergedError, EpochResult, StopTraining, TrainConfig,
                                run_epochs)


# ---------------------------------------------------------------------------------------------
# losses
# ---------------------------------------------------------------------------------------------

def _targets(loss, rng, shape):
    if loss.kind == "binary":
        return rng.choice([-1.0, 1.0], size=shape)
    return rng.normal(size=shape)


@pytest.mark.parametrize("name", [n for n in LOSSES if n not in ("softmax", "squared", "log")])
def test_loss_derivative_matches_finite_differences(name):
    loss = get_loss(name, epsilon=0.3) if name != "smoothed_hinge" else LOSSES[name](0.5)
    rng = np.random.default_rng(0)
    f = rng.normal(scale=2.0, size=200)
    y = _targets(loss, rng, 200)
    h = 1e-6
    num = (loss.loss(f + h, y) - loss.loss(f - h, y)) / (2 * h)
    # Kinks: skip points within h of a breakpoint.
    ok = np.abs(num - loss.dloss(f, y)) < 1e-4
    assert ok.mean() > 0.97, name
    if loss.twice_differentiable:
        num2 = (loss.dloss(f + h, y) - loss.dloss(f - h, y)) / (2 * h)
        assert (np.abs(num2 - loss.hess(f, y)) < 1e-3).mean() > 0.97


def test_loss_values_from_the_spec():
    huber = get_loss("huber", epsilon=1.0)
    np.testing.assert_allclose(huber.loss(np.array([0.5, 3.0]), np.zeros(2)), [0.125, 2.5])
    log = get_loss("log_loss")
    np.testing.assert_allclose(log.loss(np.array([0.0, 2.0]), np.array([1.0, -1.0])),
                               [np.log(2), np.log1p(np.exp(2.0))])
    # No overflow for large margins.
    assert np.isfinite(log.loss(np.array([1e4]), np.array([-1.0]))).all()
    hinge = get_loss("hinge")
    np.testing.assert_array_equal(hinge.loss(np.array([2.0, 0.5, -1.0]), np.ones(3)),
                                  [0.0, 0.5, 2.0])
    perc = get_loss("perceptron")
    np.testing.assert_array_equal(perc.dloss(np.array([0.0, 1.0]), np.ones(2)), [-1.0, 0.0])
    mh = get_loss("modified_huber")
    np.testing.assert_array_equal(mh.loss(np.array([2.0, 0.0, -3.0]), np.ones(3)), [0, 1, 12])


def test_softmax_gradient_and_stability():
    sm = get_loss("softmax")
    rng = np.random.default_rng(1)
    f = rng.normal(size=(5, 3))
    y = np.array([0, 2, 1, 1, 0])
    loss, grad = sm.loss_grad(f.copy(), y)
    h = 1e-6
    for i in range(5):
        for k in range(3):
            fp, fm = f.copy(), f.copy()
            fp[i, k] += h
            fm[i, k] -= h
            num = (sm.loss(fp, y)[i] - sm.loss(fm, y)[i]) / (2 * h)
            assert abs(num - grad[i, k]) < 1e-6
    big = np.array([[1000.0, 0.0, -1000.0]])
    l, g = sm.loss_grad(big, np.array([2]))
    assert np.isfinite(l).all() and np.isfinite(g).all()


def test_smoothed_hinge_brackets_the_hinge():
    rng = np.random.default_rng(2)
    f, y = rng.normal(size=500), rng.choice([-1.0, 1.0], 500)
    mu = 0.2
    s = get_loss("smoothed_hinge") if False else LOSSES["smoothed_hinge"](mu)
    h = get_loss("hinge").loss(f, y)
    assert np.all(s.loss(f, y) <= h + 1e-15) and np.all(s.loss(f, y) >= h - mu / 2 - 1e-15)


def test_unknown_loss_names_the_choices():
    with pytest.raises(ValueError, match="unknown loss 'hing'.*hinge"):
        get_loss("hing")


# ---------------------------------------------------------------------------------------------
# penalties, schedules, optimisers
# ---------------------------------------------------------------------------------------------

def test_penalty_gradient_prox_and_unpenalised_intercept():
    p = make_penalty("elasticnet", alpha=0.2, l1_ratio=0.25, penalised=slice(0, 3))
    w = np.array([1.0, -0.01, 0.0, 7.0])
    assert p.value(w) == pytest.approx(0.2 * (0.25 * 1.01 + 0.75 * 0.5 * (1 + 1e-4)))
    g = np.zeros(4)
    p.add_grad(w, g)
    np.testing.assert_allclose(g, [0.15, -0.0015, 0.0, 0.0])
    p.prox(w, lr=0.1)  # threshold 0.1 * 0.05 = 0.005
    np.testing.assert_allclose(w, [0.995, -0.005, 0.0, 7.0])
    mask = np.array([True, False, True, False])
    q = Penalty("l1", 1.0, penalised=mask)
    w = np.array([0.5, 0.5, -0.05, 0.5])
    q.prox(w, 0.1)
    np.testing.assert_allclose(w, [0.4, 0.5, 0.0, 0.5])
    with pytest.raises(ValueError, match="penalty must be one of"):
        Penalty("l3", 1.0)
    with pytest.raises(ValueError, match="alpha"):
        Penalty("l2", -1.0)


def test_schedules():
    assert make_schedule("constant", eta0=0.5)(100) == 0.5
    s = make_schedule("invscaling", eta0=1.0, power_t=0.25)
    assert s(16) == pytest.approx(0.5)
    opt = make_schedule("optimal", alpha=1e-4)
    t0 = optimal_t0(1e-4, get_loss("hinge"))
    # scikit-learn: typw = sqrt(1/sqrt(alpha)) = 10, t0 = 1 / (10 * 1e-4) = 1000.
    assert t0 == pytest.approx(1000.0)
    assert opt(1) == pytest.approx(1.0 / (1e-4 * 1000.0))
    a = make_schedule("adaptive", eta0=0.1)
    assert a.adaptive and a(5, 0.2) == pytest.approx(0.02)
    with pytest.raises(ValueError, match="learning_rate must be one of"):
        make_schedule("fast")
    with pytest.raises(ValueError, match="eta0 must be > 0"):
        make_schedule("constant", eta0=0.0)


def test_adam_matches_the_spec_formula():
    rng = np.random.default_rng(0)
    opt = make_optimizer("adam")
    w = rng.normal(size=4)
    ref = w.copy()
    m = np.zeros(4)
    v = np.zeros(4)
    state = opt.init_state(w)
    for t in range(1, 6):
        g = rng.normal(size=4)
        opt.step(w, g, 0.01, state.slots, t)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        ref = ref - 0.01 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    np.testing.assert_allclose(w, ref, rtol=1e-12)


def test_nesterov_and_average():
    opt = make_optimizer("nesterov", momentum=0.5)
    w = np.zeros(1)
    st = opt.init_state(w, average=True)
    opt.step(w, np.ones(1), 1.0, st.slots, 1)  # v = -1; w += 0.5 * -1 - 1
    assert w[0] == -1.5
    update_average(w, st.slots, 1, 0)
    w2 = np.array([-3.5])
    update_average(w2, st.slots, 2, 0)
    assert st.slots["average"][0] == pytest.approx(-2.5)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        make_optimizer("rmsprop")


# ---------------------------------------------------------------------------------------------
# the epoch loop, checkpoints
# ---------------------------------------------------------------------------------------------

def test_stopping_rule_counts_epochs_without_improvement():
    objectives = iter([1.0, 0.5, 0.4999, 0.4998, 0.49995, 0.3])
    state = TrainState(np.zeros(1))

    def epoch(st):
        return EpochResult(next(objectives))

    out = run_epochs(state, epoch, TrainConfig(max_iter=10, tol=1e-3, n_iter_no_change=3))
    assert out.stop_reason == "converged" and out.epoch == 5
    assert [h["epoch"] for h in out.history] == [1, 2, 3, 4, 5]
    assert all("seconds" in h for h in out.history)


def test_adaptive_schedule_divides_instead_of_stopping():
    state = TrainState(np.zeros(1))
    out = run_epochs(state, lambda st: EpochResult(1.0),
                     TrainConfig(max_iter=20, tol=0.0, n_iter_no_change=2, adaptive_eta0=1e-5))
    # 1e-5 -> 2e-6 (>= 1e-6) once; the next plateau stops.
    assert out.lr_scale == pytest.approx(0.2) and out.stop_reason == "converged"


def test_divergence_is_reported_with_the_learning_rate():
    vals = iter([1.0, 1e3, math.inf])
    with pytest.raises(DivergedError, match=r"diverged at epoch 3 \(objective inf\); lower the "
                                            r"learning rate \(eta0=5\)"):
        run_epochs(TrainState(np.zeros(1)), lambda st: EpochResult(next(vals)),
                   TrainConfig(max_iter=5, lr_hint="eta0=5"))
    vals = iter([1.0, 1e12])
    with pytest.raises(DivergedError, match="epoch 2"):
        run_epochs(TrainState(np.zeros(1)), lambda st: EpochResult(next(vals), reference=1.0),
                   TrainConfig(max_iter=5))


def test_checkpoint_roundtrip_is_exact(tmp_path):
    rng = np.random.default_rng(0)
    st = TrainState(rng.normal(size=5), seed=42, epoch=3, lr_scale=0.2, best_objective=0.1,
                    no_improvement=2, history=[{"epoch": 1, "objective": math.inf}],
                    extra={"reference_objective": 0.7})
    st.opt.t = 77
    st.opt.slots = {"m": rng.normal(size=5), "average": rng.normal(size=5)}
    st.arrays = {"P": rng.normal(size=(2, 3))}
    ckpt.save(tmp_path, st, {"a": 1, "lengths": np.array([3, 4])})
    back = ckpt.load(tmp_path, {"a": 1, "lengths": [3, 4]})
    np.testing.assert_array_equal(back.params, st.params)
    np.testing.assert_array_equal(back.opt.slots["m"], st.opt.slots["m"])
    np.testing.assert_array_equal(back.arrays["P"], st.arrays["P"])
    assert (back.seed, back.epoch, back.opt.t, back.lr_scale, back.no_improvement) == \
        (42, 3, 77, 0.2, 2)
    assert back.history[0]["objective"] == math.inf and back.extra["reference_objective"] == 0.7
    with pytest.raises(ckpt.CheckpointMismatch, match="different fit.*a: checkpoint 1 vs now 2"):
        ckpt.load(tmp_path, {"a": 2, "lengths": [3, 4]})
    # A second save leaves one npz and a valid json.
    st.epoch = 4
    ckpt.save(tmp_path, st)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json", "state-000004.npz"]
    assert json.loads((tmp_path / "checkpoint.json").read_text())["epoch"] == 4


# ---------------------------------------------------------------------------------------------
# the local-SGD driver
# ---------------------------------------------------------------------------------------------

class LeastSquares(Problem):
    """½ (x·w + b − y)²: a module-level problem (picklable by reference on process workers)."""

    def __init__(self, d):
        self.n_params = d + 1
        self.penalised = slice(0, d)

    def batch_loss_grad(self, params, X, Y, w):
        r = X @ params[:-1] + params[-1] - Y
        rw = r if w is None else w * r
        g = np.empty_like(params)
        g[:-1] = X.T @ rw
        g[-1] = rw.sum()
        return 0.5 * float(np.dot(rw, r)), g


def _data(n=203, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 0.5 + 0.1 * rng.normal(size=n)
    return X, y


def reference_sgd(X, y, epochs, B, eta, alpha, seed):
    """Plain sequential mini-batch SGD written out (the arithmetic of the engine, one block)."""
    n, d = X.shape
    params = np.zeros(d + 1)
    for epoch in range(1, epochs + 1):
        order = block_rng(seed, "shuffle", epoch, 0).permutation(n)
        for s in range(-(-n // B)):
            idx = order[s * B:(s + 1) * B]
            Xb, yb = X[idx], y[idx]
            r = Xb @ params[:-1] + params[-1] - yb
            g = np.empty_like(params)
            g[:-1] = Xb.T @ r
            g[-1] = r.sum()
            g /= len(idx)
            g[:-1] += alpha * params[:-1]
            params -= eta * g
    return params


def _fit(X, y, *, block_rows, epochs=3, B=16, local_steps=None, seed=7, tol=None, cfg=None,
         train_cfg=None, validation_fraction=None, state=None):
    problem = LeastSquares(X.shape[1])
    cfg = cfg or SGDConfig(schedule=make_schedule("constant", eta0=0.05),
                           penalty=Penalty("l2", 0.01, penalised=slice(0, X.shape[1])),
                           batch_size=B, local_steps=local_steps)
    data = prepare(problem, as_blocks(X, y, block_rows=block_rows), seed=seed,
                   validation_fraction=validation_fraction)
    st = state or initial_state(problem, cfg, seed)
    tc = train_cfg or TrainConfig(max_iter=epochs, tol=tol)
    return train(problem, data, cfg, tc, st), cfg


@pytest.mark.parametrize("local_steps", [None, 1, 5])
def test_one_block_is_plain_sequential_sgd_bit_for_bit(local_steps):
    X, y = _data()
    st, _ = _fit(X, y, block_rows=10_000, local_steps=local_steps)
    ref = reference_sgd(X, y, epochs=3, B=16, eta=0.05, alpha=0.01, seed=7)
    assert np.array_equal(st.params, ref)
    assert st.opt.t == 3 * 13 and len(st.history) == 3


def test_epoch_plan_weights_and_rounds():
    L, rounds = epoch_plan([10, 30, 20], batch_size=5, local_steps=2)
    assert L == 2 and len(rounds) == 3           # the longest block takes 6 steps
    assert rounds[0][0] == pytest.approx((1 / 6, 1 / 2, 1 / 3))
    assert rounds[1][0] == pytest.approx((0.0, 0.6, 0.4))   # the 2-step block sits out
    assert [t for _, t in rounds] == [2, 2, 2]
    L, rounds = epoch_plan([10, 30, 20], batch_size=5, local_steps=None)
    assert L == 6 and len(rounds) == 1


def test_several_blocks_converge_and_average():
    X, y = _data(n=600)
    st, cfg = _fit(X, y, block_rows=97, epochs=20, local_steps=None)
    lr = np.linalg.lstsq(np.c_[X, np.ones(len(X))], y, rcond=None)[0]
    np.testing.assert_allclose(st.params, lr, atol=0.05)
    assert st.history[-1]["objective"] < st.history[0]["objective"]


def test_same_model_for_1_2_3_workers_and_threads():
    X, y = _data(n=400)
    kw = dict(block_rows=60, epochs=3, local_steps=3)
    base, _ = _fit(X, y, **kw)  # threaded scheduler
    for n_workers in (1, 2, 3):
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False,
                          dashboard_address=":0") as cluster, Client(cluster):
            st, _ = _fit(X, y, **kw)
        assert np.array_equal(st.params, base.params), n_workers
        assert [h["objective"] for h in st.history] == [h["objective"] for h in base.history]


def test_process_cluster_gives_the_same_model(process_client):
    X, y = _data(n=300)
    kw = dict(block_rows=70, epochs=2, local_steps=2, validation_fraction=0.2)
    st, _ = _fit(X, y, **kw)  # on the multi-process cluster (the fixture's client is current)
    with dask.config.set(scheduler="sync"):
        ref, _ = _fit(X, y, **kw)
    assert np.array_equal(st.params, ref.params)
    assert [h["validation_score"] for h in st.history] == \
        [h["validation_score"] for h in ref.history]


def test_validation_split_and_early_stopping():
    X, y = _data(n=500)
    cfg_train = TrainConfig(max_iter=50, tol=1e-4, n_iter_no_change=2, early_stopping=True)
    st, _ = _fit(X, y, block_rows=100, train_cfg=cfg_train, validation_fraction=0.2)
    assert st.stop_reason == "converged" and st.epoch < 50
    assert all("validation_score" in h for h in st.history)
    data = prepare(LeastSquares(4), as_blocks(X, y, block_rows=100), seed=1,
                   validation_fraction=0.2)
    assert data.validation_lengths.tolist() == [20] * 5 and data.n_train == 400
    with pytest.raises(ValueError, match="sets aside no rows"):
        prepare(LeastSquares(4), as_blocks(X[:4], y[:4]), validation_fraction=0.1)


def test_averaging_returns_the_running_mean():
    X, y = _data(n=100)
    cfg = SGDConfig(schedule=make_schedule("constant", eta0=0.05), batch_size=10, average=0)
    st, cfg = _fit(X, y, block_rows=1000, epochs=2, cfg=cfg)
    avg = final_params(st, cfg)
    assert not np.array_equal(avg, st.params)
    # Recompute the mean of the 20 iterates with the same steps.
    problem = LeastSquares(4)
    params = np.zeros(5)
    iterates = []
    for epoch in (1, 2):
        order = block_rng(7, "shuffle", epoch, 0).permutation(100)
        for s in range(10):
            idx = order[s * 10:(s + 1) * 10]
            _, g = problem.batch_loss_grad(params, X[idx], y[idx], None)
            params -= 0.05 * (g / 10)
            iterates.append(params.copy())
    np.testing.assert_allclose(avg, np.mean(iterates, axis=0), rtol=1e-12)


def test_divergence_in_a_round_names_the_learning_rate():
    X, y = _data(n=200)
    X = X * 100
    cfg = SGDConfig(schedule=make_schedule("constant", eta0=10.0), batch_size=16)
    with pytest.raises(DivergedError, match=r"diverged at epoch 1 .*eta0=10"):
        _fit(X, y, block_rows=50, cfg=cfg, epochs=5)


class _Interrupt(Exception):
    pass


def _interrupt_after(k):
    def cb(state, record):
        if state.epoch == k:
            raise _Interrupt()
    return cb


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_resume_from_checkpoint_equals_uninterrupted_fit(tmp_path, optimizer):
    X, y = _data(n=300)
    cfg = SGDConfig(optimizer=make_optimizer(optimizer),
                    schedule=make_schedule("adaptive", eta0=0.01), batch_size=16, average=5,
                    penalty=Penalty("l2", 0.01, penalised=slice(0, 4)))
    fp = {"fit": "test"}

    def run(ckdir, callbacks=(), max_iter=6):
        problem = LeastSquares(4)
        data = prepare(problem, as_blocks(X, y, block_rows=70), seed=3)
        tc = TrainConfig(max_iter=max_iter, tol=1e-2, n_iter_no_change=1,
                         checkpoint_dir=ckdir, callbacks=callbacks)
        return train(problem, data, cfg, tc, initial_state(problem, cfg, 3), fingerprint=fp)

    full = run(None)
    with pytest.raises(_Interrupt):
        run(str(tmp_path / "a"), callbacks=[_interrupt_after(3)])
    assert ckpt.load(tmp_path / "a").epoch == 3
    resumed = run(str(tmp_path / "a"))
    assert np.array_equal(resumed.params, full.params)
    assert np.array_equal(final_params(resumed, cfg), final_params(full, cfg))
    assert [h["objective"] for h in resumed.history] == [h["objective"] for h in full.history]
    assert resumed.lr_scale == full.lr_scale and resumed.opt.t == full.opt.t
    # Fitting to 3 epochs first, then to 6 with the same directory, is the same again.
    run(str(tmp_path / "b"), max_iter=3)
    again = run(str(tmp_path / "b"))
    assert np.array_equal(again.params, full.params)


def test_callback_can_stop_training():
    X, y = _data(n=100)

    def stop(state, record):
        if state.epoch == 2:
            raise StopTraining()

    tc = TrainConfig(max_iter=10, tol=None, callbacks=[stop])
    st, _ = _fit(X, y, block_rows=50, train_cfg=tc)
    assert st.epoch == 2 and st.stop_reason == "callback"


def test_verbose_logs_and_shows_progress(caplog, capsys):
    X, y = _data(n=100)
    seen = []
    tc = TrainConfig(max_iter=2, tol=None, verbose=1, name="Toy")
    with caplog.at_level("INFO", logger="dml"):
        _fit(X, y, block_rows=50, train_cfg=tc)
    assert sum("Toy epoch" in r.getMessage() for r in caplog.records) == 2
    assert "epoch 2/2" in capsys.readouterr().err
    tc = TrainConfig(max_iter=2, tol=None, progress=seen.append)
    _fit(X, y, block_rows=50, train_cfg=tc)
    assert [r["epoch"] for r in seen] == [1, 2]


def test_notebook_progress_outside_a_kernel_falls_back_to_text(capsys):
    """progress="notebook" in a script (no Jupyter kernel) shows the text line instead."""
    from dml.optim.progress import NotebookProgress, TextProgress, in_notebook, make_progress

    assert not in_notebook()
    assert isinstance(make_progress("notebook", verbose=0), TextProgress)
    X, y = _data(n=100)
    _fit(X, y, block_rows=50, train_cfg=TrainConfig(max_iter=2, tol=None, progress="notebook"))
    assert "epoch 2/2" in capsys.readouterr().err
    with pytest.raises(TypeError, match="'notebok'"):
        make_progress("notebok", verbose=0)
    assert isinstance(NotebookProgress(), NotebookProgress)


def test_notebook_progress_renders_an_html_bar():
    """The bar's HTML: a <progress> element, the epoch count, the record's numbers, escaped."""
    from dml.optim.progress import NotebookProgress

    bar = NotebookProgress()
    bar.total, bar.desc = 4, "<MLP>"
    page = bar.render(3, {"objective": 0.5, "validation_score": 0.75})
    assert '<progress value="3" max="4"' in page and "epoch 3/4" in page
    assert "objective 0.5" in page and "val 0.75" in page
    assert "&lt;MLP&gt;" in page and "<MLP>" not in page


def test_large_averaged_models_take_one_round_per_epoch():
    """Averaging rounds cost O(parameters) per stream: a model of LARGE_MODEL_PARAMS or more
    (a linear model on hashed text) runs one round per epoch, a small one several."""
    from dml.optim.engine import AVERAGE_ROUNDS, LARGE_MODEL_PARAMS
    from dml.optim.schedules import Optimal
    from dml.optim.streams import EqualShares, make_streams

    layout = make_streams(np.array([4096, 4096, 4096]), 32, None)
    cfg = SGDConfig(schedule=Optimal(), batch_size=32)
    assert cfg.combine_mode == "average"
    assert cfg.steps_per_round(layout, 100) == EqualShares(AVERAGE_ROUNDS)
    assert cfg.steps_per_round(layout, LARGE_MODEL_PARAMS) is None
    # Summed updates keep their short rounds whatever the size.
    summed = SGDConfig(schedule=Optimal(), batch_size=32, combine="sum")
    assert summed.steps_per_round(layout, LARGE_MODEL_PARAMS) is not None
    # Only models whose steps cost less than their parameters: a large linear model, not a
    # network (its steps cost a multiple of its parameters; rounds keep its first epoch good).
    from dml.linear_model._problem import LinearProblem
    from dml.neural_network._problem import MLPProblem
    from dml.optim.engine import round_cost_params

    assert LinearProblem.steps_cheaper_than_params and not MLPProblem.steps_cheaper_than_params

    class Big:
        n_params = LARGE_MODEL_PARAMS
        steps_cheaper_than_params = False

    assert round_cost_params(Big()) == 0
    Big.steps_cheaper_than_params = True
    assert round_cost_params(Big()) == LARGE_MODEL_PARAMS

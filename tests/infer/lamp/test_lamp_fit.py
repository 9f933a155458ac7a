"""LatentMAP on DAGDGPs: reduction to MAP GP regression, a two-layer fit that beats a single GP, mini-batch
bookkeeping, checkpointing, DAGs beyond the chain, the DAGDGP / train integration and bad input."""
import networkx as nx
import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from pyro_dag import DAGDGP, DAGInputError
from pyro_dag.infer import LatentMAP, train
from pyro_dag.infer.lamp import FittedNode, LaMPSettings, LinkedGPPredictor


def _noisy_1d(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g, dtype=torch.float64)
    return x, torch.sin(6 * x) + 0.1 * torch.randn(n, 1, generator=g, dtype=torch.float64)


def _step(x):
    return torch.tanh(30 * (x - 0.5))


def _lbfgs_map_gp(x, y):
    """Brute-force reference: scipy's L-BFGS on the profiled exact-GP marginal likelihood (numpy, independent)."""
    X, Y, n = x.numpy(), y.numpy()[:, 0], len(y)

    def nll(p):
        ell, g = np.exp(p)
        K = np.exp(-0.5 * (X - X.T) ** 2 / ell ** 2) + g * np.eye(n)
        L = np.linalg.cholesky(K)
        a = np.linalg.solve(L, Y)
        return 0.5 * n * (np.log(2 * np.pi * a @ a / n) + 1) + np.log(np.diag(L)).sum()

    res = minimize(nll, [np.log(0.3), np.log(0.01)], method="L-BFGS-B")
    ell, g = np.exp(res.x)
    K = np.exp(-0.5 * (X - X.T) ** 2 / ell ** 2) + g * np.eye(n)
    tau2 = Y @ np.linalg.solve(K, Y) / n
    return res.x, tau2, (lambda xs: np.exp(-0.5 * (xs - X.T) ** 2 / ell ** 2) @ np.linalg.solve(K, Y))


def test_one_node_dag_is_map_gp_regression():
    """x -> y: no hidden node, so LaMP is type-II maximum likelihood of one exact GP with τ² profiled."""
    x, y = _noisy_1d()
    log_ref, tau2_ref, mean_ref = _lbfgs_map_gp(x, y)
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "y")])).double(), nugget="estimate")
    history = lamp.fit({"x": x}, {"y": y}, batch="full", num_epochs=500, hyper_every=1, validation_fraction=0)
    hp = lamp.hyperparameters()["y"]
    assert hp["lengthscale"].log().item() == pytest.approx(log_ref[0], abs=2e-3)
    assert hp["nugget"].log().item() == pytest.approx(log_ref[1], abs=2e-3)
    assert hp["variance"].item() == pytest.approx(tau2_ref, rel=2e-3)
    xs = torch.linspace(0, 1, 7, dtype=torch.float64)[:, None]
    pred = lamp.predict({"x": xs}, num_samples=0)["y"]
    np.testing.assert_allclose(pred.mean[:, 0].numpy(), mean_ref(xs.numpy()), atol=1e-3)
    assert len(history.losses) == 500 and history.best_epoch == 500 and history.validation == []


@pytest.mark.parametrize("seed", [0, 1])
def test_two_layer_chain_beats_a_single_gp_on_a_step(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(60, 1, generator=g, dtype=torch.float64)
    xt = torch.linspace(0, 1, 200, dtype=torch.float64)[:, None]
    errors = {}
    for name, graph in [("dgp", [("x", "w"), ("w", "y")]), ("gp", [("x", "y")])]:
        # a 1-D design of 60 cases is well conditioned: the paper's tiny numerical jitter works here
        lamp = LatentMAP(DAGDGP(nx.DiGraph(graph)).double(), jitter=1e-6)
        lamp.fit({"x": x}, {"y": _step(x)}, num_epochs=500, seed=seed)
        errors[name] = (lamp.predict({"x": xt}, num_samples=0)["y"].mean - _step(xt)).pow(2).mean().sqrt().item()
    assert errors["dgp"] < 0.6 * errors["gp"] and errors["dgp"] < 0.02, errors


def test_minibatch_rows_are_updated_once_per_epoch_and_the_best_iterate_is_kept():
    g = torch.Generator().manual_seed(2)
    x = torch.rand(120, 2, generator=g, dtype=torch.float64)
    y = torch.sin(3 * x.sum(-1, keepdim=True))
    model = DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")]), output_dims={"w": 2}).double()
    lamp = LatentMAP(model)
    history = lamp.fit({"x": x}, {"y": y}, batch="minibatch", num_epochs=30, batch_min=20, batch_max=40,
                       batch_growth=5.0, hyper_every=5, validate_every=5, condition_on_validation=False)
    assert history.settings.minibatch and history.num_train == 96 and history.num_validation == 24
    assert history.batch_sizes[:3] == [20, 20, 20] and history.batch_sizes[-1] == 28   # ⌈5 √30⌉
    assert torch.equal(lamp._row_adams["w"].steps, torch.full((96,), 30))               # once per epoch each
    assert [t for t, _ in history.validation] == [5, 10, 15, 20, 25, 30]
    scores = [s for _, s in history.validation]
    assert history.best_validation == min(scores) and history.best_epoch == 5 * (1 + scores.index(min(scores)))
    # the kept iterate is the best one: its validation RMSE, recomputed from the fitted nodes, is the best score
    val = torch.ones(120, dtype=torch.bool)
    val[lamp.train_rows] = False
    mean = lamp.predictor(method="exact").moments({"x": x[val]}, nodes="y")["y"][0]
    best_rmse = dict(history.validation_rmse)[history.best_epoch]["y"]
    assert (mean - y[val]).pow(2).mean().sqrt().item() == pytest.approx(best_rmse, rel=1e-4)
    sd = y[lamp.train_rows].std(unbiased=False).item()
    assert history.best_validation == pytest.approx(best_rmse / sd, rel=1e-10)     # the standardised RMSE


def test_fitted_nodes_and_predictor_of_a_diamond_with_an_observed_internal_node():
    """x -> a (observed), x -> h (hidden), {a, h} -> y: a non-chain DAG."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(50, 1, generator=g, dtype=torch.float64)
    a = torch.sin(4 * x)
    y = a * torch.cos(3 * x)
    graph = nx.DiGraph([("x", "a"), ("x", "h"), ("a", "y"), ("h", "y")])
    lamp = LatentMAP(DAGDGP(graph).double(), kernel="matern52", lengthscale="ard")
    history = lamp.fit({"x": x}, {"a": a, "y": y}, num_epochs=60)
    nodes = lamp.fitted_nodes()
    assert set(nodes) == {"a", "h", "y"} and all(isinstance(f, FittedNode) for f in nodes.values())
    rows = lamp.fitted_rows
    assert rows.tolist() == list(range(50))                   # conditioned on the validation cases too
    assert nodes["a"].observed and torch.equal(nodes["a"].y, a[rows])
    assert not nodes["h"].observed and torch.equal(nodes["h"].y, lamp.latent_values()["h"])
    assert nodes["h"].variance.tolist() == [1.0] and nodes["y"].inputs == ("a", "h")
    assert torch.equal(nodes["y"].X, torch.cat([a[rows], lamp.latent_values()["h"]], -1))
    assert nodes["y"].lengthscale.shape == (1, 2) and nodes["y"].kernel == "matern52"
    assert isinstance(lamp.predictor(), LinkedGPPredictor)
    pred = lamp.predict({"x": x[:5]}, num_samples=8, seed=0)
    assert pred["y"].samples.shape == (8, 5, 1) and pred["y"].mean.shape == (5, 1)
    assert pred["h"].y_mean is None and torch.all(pred["y"].y_variance > pred["y"].variance)
    noisy = lamp.predictor().moments({"x": x[:5]}, include_noise=True)["y"]
    torch.testing.assert_close(pred["y"].y_variance, noisy[1])
    torch.testing.assert_close(pred["y"].mean, noisy[0])
    assert np.isfinite(history.losses).all()


@pytest.mark.parametrize("d_x, d_w", [(2, 2), (3, 1), (1, 2)])
def test_initial_latent_values(d_x, d_w):
    """W⁽⁰⁾ with ``init="pca"``: the standardised parents (equal dims), their leading principal components (more), or
    their columns repeated with a little noise (fewer); a zero W learning rate keeps it."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(40, d_x, generator=g, dtype=torch.float64) * torch.arange(1, d_x + 1)
    y = torch.sin(3 * x.sum(-1, keepdim=True))
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")]), output_dims={"w": d_w}).double(), init="pca")
    lamp.fit({"x": x}, {"y": y}, num_epochs=2, lr={"W": 0.0}, validation_fraction=0)
    W = lamp.latent_values()["w"]
    xs = x[lamp.train_rows]
    xs = (xs - xs.mean(0)) / xs.std(0, unbiased=False)
    if d_x == d_w:
        torch.testing.assert_close(W, xs)
    elif d_x > d_w:
        pc = torch.linalg.svd(xs, full_matrices=False).Vh[0]
        corr = torch.corrcoef(torch.stack([W[:, 0], xs @ pc]))[0, 1]
        assert abs(corr.item()) == pytest.approx(1.0, abs=1e-10) and W.std(unbiased=False).item() == pytest.approx(1)
    else:
        assert not torch.equal(W[:, 0], W[:, 1])
        assert (W - xs[:, [0, 0]]).abs().max() < 0.5


def test_exact_start_of_a_narrow_hidden_node():
    """init="exact" (the default): a hidden node narrower than its inputs starts at the exact GP's fit of its observed
    descendant (standardised), its first-layer ARD length-scales at the pilot's; the other columns stay at the
    principal components; equal widths keep the paper's W = X."""
    from pyro_dag.baselines import ExactGP

    g = torch.Generator().manual_seed(1)
    x = torch.rand(50, 3, generator=g, dtype=torch.float64)
    y = torch.sin(4 * x[:, :1]) + x[:, 1:2] ** 2
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")]), output_dims={"w": 2}).double())
    assert lamp.init == "exact" and lamp.lengthscale_kind == "ard"
    lamp.fit({"x": x}, {"y": y}, num_epochs=1, lr={"W": 0.0, "theta_hidden": 0.0}, validation_fraction=0,
             condition_on_validation=False)
    W = lamp.latent_values()["w"]
    xs, ys = x[lamp.train_rows], y[lamp.train_rows, 0]
    pilot = ExactGP(restarts=2, max_exact=300, seed=0).fit(xs, ys)
    ref = pilot.predict(xs)[0]
    torch.testing.assert_close(W[:, 0], (ref - ref.mean()) / ref.std(unbiased=False))
    pcs = (xs - xs.mean(0)) / xs.std(0, unbiased=False)
    pc = pcs @ torch.linalg.svd(pcs, full_matrices=False).Vh[1]
    assert abs(torch.corrcoef(torch.stack([W[:, 1], pc]))[0, 1].item()) == pytest.approx(1.0, abs=1e-10)
    torch.testing.assert_close(lamp._log_ls["w"][0].detach().exp(), pilot.lengthscales)
    with pytest.raises(ValueError, match="init"):
        LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])), init="prior")


def test_partially_observed_leaf_uses_its_observed_cases():
    x, y = _noisy_1d(n=30)
    y[::3] = float("nan")
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double(), nugget="estimate")
    lamp.fit({"x": x}, {"y": y}, num_epochs=30)
    node = lamp.fitted_nodes()["y"]
    keep = ~torch.isnan(y[:, 0])                       # all cases (conditioned on the validation cases too)
    assert node.X.shape[0] == int(keep.sum()) and torch.equal(node.y, y[keep])
    lamp.fit({"x": x}, {"y": y}, num_epochs=30, condition_on_validation=False)
    node = lamp.fitted_nodes()["y"]
    keep = ~torch.isnan(y[lamp.train_rows, 0])
    assert node.X.shape[0] == int(keep.sum()) and torch.equal(node.y, y[lamp.train_rows][keep])


def test_dagdgp_predict_and_train_recipe_lamp():
    x, y = _noisy_1d(n=30)
    model = DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double()
    lamp = LatentMAP(model)
    result = train(model, lamp, {"x": x}, {"y": y}, num_steps=40, recipe="lamp")
    assert result.num_steps == 40 and result.best_step == lamp.history.best_epoch
    assert result.settings["recipe"] == "lamp"
    pred = model.predict(lamp, {"x": x[:4]}, num_samples=6)
    direct = lamp.predict({"x": x[:4]}, num_samples=6)
    torch.testing.assert_close(pred["y"].mean, direct["y"].mean)
    assert pred["y"].samples.shape == (6, 4, 1)
    with pytest.raises(DAGInputError, match="num_samples must be a positive integer, got 0"):
        model.predict(lamp, {"x": x[:4]}, num_samples=0)       # as DAGDGP.predict (was: empty samples, no word)


def test_zero_rows_are_refused_as_zero_cases():
    """Earlier: "data['y'] has no observed entries; drop it from data"."""
    x = torch.zeros(0, 1, dtype=torch.float64)
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double())
    with pytest.raises(DAGInputError, match=r"inputs\['x'\] has zero rows \(zero cases\)"):
        lamp.fit({"x": x}, {"y": x})


def test_an_interrupted_fit_leaves_an_unfitted_latent_map():
    """Earlier predict after a KeyboardInterrupt in the fit raised AttributeError ('input_dims')."""
    from pyro_dag.errors import NotFittedError
    from pyro_dag.infer.lamp.row_adam import RowwiseAdam

    x, y = _noisy_1d(n=20)
    model = DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double()
    lamp = LatentMAP(model)
    real = RowwiseAdam.step
    calls = []

    def step(self, *a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    RowwiseAdam.step = step
    try:
        with pytest.raises(KeyboardInterrupt):
            lamp.fit({"x": x}, {"y": y}, num_epochs=10)
    finally:
        RowwiseAdam.step = real
    assert not lamp.is_fitted
    for call in (lambda: model.predict(lamp, {"x": x}, num_samples=2), lambda: lamp.predict({"x": x})):
        with pytest.raises(NotFittedError, match="the last fit did not finish.*call fit"):
            call()
    lamp.fit({"x": x}, {"y": y}, num_epochs=2)
    assert lamp.is_fitted and torch.isfinite(lamp.predict({"x": x}, num_samples=2)["y"].mean).all()


def test_float32_follows_the_model():
    x, y = _noisy_1d(n=30)
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])))
    lamp.fit({"x": x}, {"y": y}, num_epochs=30)
    assert lamp.latent_values()["w"].dtype == torch.float32
    assert lamp.predict({"x": x[:3]}, num_samples=2)["y"].mean.dtype == torch.float32


def test_after_selection_the_fitted_gps_condition_on_the_validation_cases():
    """With condition_on_validation (the default) the selected iterate is kept and every case enters the fitted GPs:
    the hidden values are the selected first layer's posterior means at all cases (brute force from the same fit
    without it), the observed node's τ̂² is profiled on all cases."""
    g = torch.Generator().manual_seed(3)
    x = torch.rand(40, 2, generator=g, dtype=torch.float64)
    y = torch.sin(3 * x.sum(-1, keepdim=True))
    fits = {}
    for flag in (False, True):
        lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")]), output_dims={"w": 2}).double(),
                         lengthscale="isotropic")   # the brute force below uses one length-scale
        lamp.fit({"x": x}, {"y": y}, num_epochs=40, seed=1, condition_on_validation=flag)
        fits[flag] = lamp
    ref, lamp = fits[False], fits[True]
    assert ref.train_rows.tolist() == lamp.train_rows.tolist() and len(ref.train_rows) == 36
    assert ref.fitted_rows.tolist() == ref.train_rows.tolist() and lamp.fitted_rows.tolist() == list(range(40))
    w = ref.fitted_nodes()["w"]
    ls = w.lengthscale[0, 0].item()
    xr = x[ref.train_rows]
    k = lambda a, b: torch.exp(-0.5 * torch.cdist(a, b).pow(2) / ls ** 2)  # noqa: E731
    mean = k(x, xr) @ torch.linalg.solve(k(xr, xr) + lamp.jitter * torch.eye(36, dtype=x.dtype), w.y)
    torch.testing.assert_close(lamp.latent_values()["w"], mean)
    node = lamp.fitted_nodes()["y"]
    assert torch.equal(node.y, y) and torch.equal(node.X, lamp.latent_values()["w"])
    torch.testing.assert_close(node.lengthscale, ref.fitted_nodes()["y"].lengthscale)
    K = torch.exp(-0.5 * torch.cdist(mean, mean).pow(2) / node.lengthscale[0, 0] ** 2)
    tau2 = (y[:, 0] @ torch.linalg.solve(K + 1e-4 * torch.eye(40, dtype=x.dtype), y[:, 0])) / 40
    assert node.variance.item() == pytest.approx(tau2.item(), rel=1e-6)
    # the held-out responses now inform the prediction: at the validation cases it nearly interpolates them
    val = torch.ones(40, dtype=torch.bool)
    val[lamp.train_rows] = False
    err = {f: (m.predict({"x": x[val]}, num_samples=0)["y"].mean - y[val]).abs().max().item() for f, m in fits.items()}
    assert err[True] < 0.5 * err[False], err


def test_one_node_gp_conditions_on_the_validation_cases():
    """x -> y: the fitted GP is an exact GP on all cases, with the length-scale selected on the training cases."""
    x, _ = _noisy_1d(n=30)
    y = torch.sin(6 * x)
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "y")])).double(), nugget=1e-6)
    lamp.fit({"x": x}, {"y": y}, num_epochs=50, hyper_every=1)
    node = lamp.fitted_nodes()["y"]
    assert torch.equal(node.X, x) and torch.equal(node.y, y)
    pred = lamp.predict({"x": x}, num_samples=0)["y"].mean
    assert (pred - y).abs().max().item() < 1e-2     # an almost noise-free GP through every case


# ------------------------------------------------------------------------------------------------ bad input
def test_repeated_design_rows_name_the_node_and_rows():
    x, y = _noisy_1d(n=20)
    x[7] = x[2]
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double(), jitter=1e-6)
    with pytest.raises(DAGInputError, match=r"node 'w'.*repeat at training rows.*jitter=1e-3"):
        lamp.fit({"x": x}, {"y": y}, num_epochs=2, validation_fraction=0)
    # with the default jitter (a nugget of the hidden node) the repeated cases are fitted, their MAP values tied
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double())
    lamp.fit({"x": x}, {"y": y}, num_epochs=20, validation_fraction=0)
    w = lamp.latent_values()["w"]
    assert torch.isfinite(w).all() and (w[7] - w[2]).abs().max().item() < 0.1 * w.std().item()
    # an observed node with an estimated nugget takes replicates
    LatentMAP(DAGDGP(nx.DiGraph([("x", "y")])).double(), nugget="estimate").fit(
        {"x": x}, {"y": y}, num_epochs=2, validation_fraction=0)


def test_wrong_input_dimension_at_prediction():
    x, y = _noisy_1d(n=20)
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double())
    lamp.fit({"x": x}, {"y": y}, num_epochs=2)
    with pytest.raises(DAGInputError, match=r"inputs\['x'\] has 2 columns.*fitted with 1"):
        lamp.predict({"x": torch.rand(3, 2, dtype=torch.float64)})
    with pytest.raises(RuntimeError, match="fit"):
        LatentMAP(DAGDGP(nx.DiGraph([("x", "y")]))).predict({"x": x})


def test_fewer_cases_than_the_batch_floor_warn_and_run_full_batch():
    x, y = _noisy_1d(n=60)
    lamp = LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double())
    with pytest.warns(UserWarning, match="floor"):
        history = lamp.fit({"x": x}, {"y": y}, batch="minibatch", num_epochs=3)
    assert history.batch_sizes == [48, 48, 48]


def test_unsupported_models_are_refused():
    x, y = _noisy_1d(n=20)
    with pytest.raises(DAGInputError, match="Bernoulli likelihood"):
        LatentMAP(DAGDGP(nx.DiGraph([("x", "y")]), likelihoods={"y": "bernoulli"}).double()).fit(
            {"x": x}, {"y": (y > 0).double()}, num_epochs=2)
    with pytest.raises(DAGInputError, match="latent inputs"):
        LatentMAP(DAGDGP(nx.DiGraph([("h", "y"), ("x", "y")]), latent_inputs={"h": 1}).double())
    with pytest.raises(DAGInputError, match="no observed descendant"):
        LatentMAP(DAGDGP(nx.DiGraph([("x", "y"), ("x", "z")])).double()).fit({"x": x}, {"y": y}, num_epochs=2)
    a = y.clone()
    a[3] = float("nan")
    with pytest.raises(DAGInputError, match="children"):
        LatentMAP(DAGDGP(nx.DiGraph([("x", "a"), ("a", "y")])).double()).fit({"x": x}, {"a": a, "y": y},
                                                                               num_epochs=2)
    with pytest.raises(ValueError, match="unknown LaMP setting"):
        LatentMAP(DAGDGP(nx.DiGraph([("x", "y")])).double()).fit({"x": x}, {"y": y}, epochs=2)
    with pytest.raises(ValueError, match="kernel"):
        LatentMAP(DAGDGP(nx.DiGraph([("x", "y")])), kernel="rq")
    assert isinstance(LaMPSettings.paper(20), LaMPSettings)
    with pytest.raises(ValueError, match="condition_on_validation must be True or False"):
        LaMPSettings.mini_batch().replace(condition_on_validation="yes")


def test_recipe_lamp_refuses_the_svi_options():
    """train(recipe="lamp") with an option of the SVI recipes (noise_step, minibatch, lr, ...) refuses it by name
    before fitting: the option used to be ignored without a word."""
    x, y = _noisy_1d(n=12)
    model = DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double()
    for option in ({"noise_step": True}, {"minibatch": False}, {"lr": 0.1, "warm_start": 2}):
        with pytest.raises(ValueError, match=f"recipe='lamp'\\): {next(iter(option))}=.*SVI recipes"):
            train(model, LatentMAP(model), {"x": x}, {"y": y}, num_steps=3, recipe="lamp", **option)
    assert LatentMAP(model).history is None

"""The noise rule (pyro_dag.gp.noise) and the model options that use it: deterministic nodes get a fixed nugget,
noisy nodes a learned noise starting at the pilot's estimate, the pilot's hyperparameters start the default
kernel, and a user's likelihood, frozen noise or kernel is never touched."""
import networkx as nx
import pytest
import torch

from pyro_dag import DAGDGP, DAGInputError, kernels
from pyro_dag.dgp.model import AUTO_INDUCING
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.gp.noise import choose_noise
from pyro_dag.utils import freeze


def _data(n=60, noise_sd=0.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, dtype=torch.float64, generator=gen)
    f = torch.sin(4 * x[:, :1]) + x[:, 1:] ** 2
    return x, f + noise_sd * torch.randn(f.shape, dtype=torch.float64, generator=gen)


def test_a_deterministic_node_gets_a_fixed_nugget_and_a_noisy_one_a_learned_noise():
    x, y = _data()
    choice = choose_noise(y[:, 0], x, parents_observed=True)
    assert choice.fixed and choice.pilot_fraction < 1e-4 and choice.inputs == "parents"
    assert choice.variance == pytest.approx(max(choice.pilot_fraction, 1e-6) * float(y.var()))
    x, y = _data(n=120, noise_sd=0.3)
    choice = choose_noise(y[:, 0], x, parents_observed=True)
    assert not choice.fixed
    assert choice.variance == pytest.approx(0.09, rel=0.5)          # the true noise variance
    # ancestral roots only (hidden nodes in between): never fixed, however small the pilot's noise
    x, y = _data()
    assert not choose_noise(y[:, 0], x, parents_observed=False).fixed
    assert choose_noise(torch.ones(10), torch.rand(10, 1), True) is None    # constant: nothing to decide


def test_noise_auto_sets_the_model_and_keeps_what_the_user_set():
    x, y = _data()
    g = nx.DiGraph([("x", "y"), ("x", "z")])
    model = DAGDGP(g, noise="auto", num_inducing=8).double()
    model.setup({"x": x}, {"y": y, "z": y + 0.3 * torch.randn_like(y)})
    assert "variance" not in model.likelihoods["y"].__dict__["_pyro_params"]    # fixed: a buffer
    assert float(model.likelihoods["y"].variance) == pytest.approx(model.noise_choices["y"].variance)
    assert "variance" in model.likelihoods["z"].__dict__["_pyro_params"]        # learned
    assert float(model.likelihoods["z"].variance.detach()) == pytest.approx(0.09, rel=0.6)
    # a user's likelihood and a frozen noise are kept
    lik = Gaussian(0.5)
    model = DAGDGP(g, noise="auto", likelihoods={"y": lik}, num_inducing=8).double()
    freeze(model.likelihoods["z"])
    model.setup({"x": x}, {"y": y, "z": y})
    assert float(model.likelihoods["y"].variance) == pytest.approx(0.5, rel=1e-6)
    assert float(model.likelihoods["z"].variance) == pytest.approx(0.1, rel=1e-6)
    assert model.noise_choices == {}


def test_noise_auto_uses_the_ancestral_roots_above_a_hidden_node():
    x, y = _data(n=80, noise_sd=0.1)
    model = DAGDGP(nx.DiGraph([("x", "h"), ("h", "y")]), noise="auto", num_inducing=8).double()
    model.setup({"x": x}, {"y": y})
    choice = model.noise_choices["y"]
    assert choice.inputs == "ancestral roots" and not choice.fixed


def test_kernel_init_pilot_starts_the_default_kernel_at_the_pilot_fit():
    x, y = _data(noise_sd=0.05)
    g = nx.DiGraph([("x", "y")])
    model = DAGDGP(g, noise="auto", kernel_init="pilot", num_inducing=8).double()
    model.setup({"x": x}, {"y": y})
    pilot = model.noise_choices["y"].pilot
    base = model.kernels["y"].base
    assert torch.allclose(base.lengthscale, pilot.lengthscales)
    assert float(base.variance) == pytest.approx(pilot.signal_variance)
    # a kernel given by the user keeps its values
    model = DAGDGP(g, kernels={"y": kernels.RBF(lengthscale=0.7)}, noise="auto", kernel_init="pilot",
                   num_inducing=8).double()
    model.setup({"x": x}, {"y": y})
    assert float(model.kernels["y"].base.lengthscale.reshape(-1)[0]) == pytest.approx(0.7)


def test_num_inducing_auto_takes_every_case_up_to_the_cap():
    x, y = _data(n=30)
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing="auto").double()
    model.setup({"x": x}, {"y": y})
    assert model.num_inducing["y"] == 30 and model.inducing_inputs("y").shape == (30, 2)
    x, y = _data(n=AUTO_INDUCING + 20)
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing={"y": "auto"}).double()
    model.setup({"x": x}, {"y": y})
    assert model.num_inducing["y"] == AUTO_INDUCING + 20      # y's input is observed: fitted exactly, cap 512
    model = DAGDGP(nx.DiGraph([("x", "h"), ("h", "y")]), num_inducing={"h": "auto", "y": "auto"}).double()
    model.setup({"x": x}, {"y": y})
    assert model.num_inducing == {"h": AUTO_INDUCING, "y": AUTO_INDUCING}   # a hidden parent: the SVI cap


@pytest.mark.parametrize("kwargs", [dict(noise="fixed"), dict(noise=-1.0), dict(kernel_init="pca"),
                                    dict(num_inducing="many")])
def test_bad_options_are_refused(kwargs):
    with pytest.raises(DAGInputError):
        DAGDGP(nx.DiGraph([("x", "y")]), **kwargs)


def test_a_fit_whose_noise_explains_what_a_plain_gp_explains_is_named():
    """The signal warning fires when the fitted noise explains most of a node's variance and the pilot GP left
    little to noise, and stays quiet when the fit agrees with the pilot."""
    from pyro_dag.infer.training.guard import NoiseExplainsDataWarning, signal_warnings

    x, y = _data(n=60, noise_sd=0.05)
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=8).double()
    model.setup({"x": x}, {"y": y})
    model.likelihoods["y"].variance = 0.9 * y.var()                 # a fit that put the signal into the noise
    with pytest.warns(NoiseExplainsDataWarning, match="node 'y'.*exact GP on its observed parents"):
        flagged = signal_warnings(model)
    assert set(flagged) == {"y"}
    model.likelihoods["y"].variance = torch.tensor(1.2 * model.noise_choices["y"].variance, dtype=torch.float64)
    assert signal_warnings(model) == {}


def test_train_names_a_node_whose_noise_took_the_signal():
    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide
    from pyro_dag.infer.training.guard import NoiseExplainsDataWarning

    x, y = _data(n=40, noise_sd=0.05)
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=8).double()
    model.setup({"x": x}, {"y": y})
    model.likelihoods["y"].variance = 0.95 * y.var()
    with pytest.warns(NoiseExplainsDataWarning, match="node 'y'"):
        # collapse=False: the exact fit would re-fit the noise (tests/infer/test_collapsed.py)
        train(model, AutoStructuredGuide(model), {"x": x}, {"y": y}, num_steps=2, progress=False, collapse=False)

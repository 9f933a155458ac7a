"""The one-sided closed-form noise step (NoiseStep): it moves an observed Gaussian node's noise to the ELBO's optimum
given the fit, only downwards, and only where the noise is learned by the steps."""
import warnings

import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import DAGELBO, train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import NoiseStep
from pyro_dag.infer.training.foreach_adam import ForeachAdam


def _observed_chain(n=40, seed=0, noise=0.5):
    """``x -> y`` with ``y`` observed: ``y``'s values are a closed-form Gaussian given ``x`` (no Monte Carlo), so the
    ELBO is a deterministic function of the noise."""
    g = torch.Generator().manual_seed(seed)
    x = torch.linspace(-2, 2, n, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(2 * x) + 0.1 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    y[3, 0] = float("nan")          # a missing entry must not count
    pyro.set_rng_seed(seed)
    pyro.clear_param_store()
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=10, noise="learned", kernel_init="default").double()
    model.likelihoods["y"].variance = torch.tensor(noise, dtype=torch.float64)
    guide = AutoStructuredGuide(model, precision="mean_field")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(model, guide, {"x": x}, {"y": y}, num_steps=60, progress=False, start_hidden=False, collapse=False,
              noise_step=False, rollback=False, best_iterate=False)
    return model, guide, {"x": x}, {"y": y}


def _loss_at(model, guide, inputs, data, tau2):
    raw = model.likelihoods["y"].variance_unconstrained
    with torch.no_grad():
        raw.fill_(float(torch.log(torch.as_tensor(tau2))))
    with torch.no_grad():
        return float(DAGELBO(num_particles=1).differentiable_loss(model, guide, inputs, data))


def test_the_step_lands_on_the_elbo_optimum_of_the_noise():
    model, guide, inputs, data = _observed_chain()
    step = NoiseStep(model, guide, inputs, data)
    before = float(model.likelihoods["y"].variance.detach())
    changed = step()
    assert set(changed) == {"y"} and step.taken == 1
    best = float(model.likelihoods["y"].variance.detach())
    assert best < before
    # the ELBO in τ² is -(n/2) log τ² - S/(2τ²) + const: the optimum is where the loss is lowest along τ²
    losses = {f: _loss_at(model, guide, inputs, data, best * f) for f in (0.8, 0.95, 1.0, 1.05, 1.25)}
    assert losses[1.0] <= min(losses.values()) + 1e-9
    # and the derivative of the loss in log τ² vanishes there (central difference)
    h = 1e-4
    slope = (_loss_at(model, guide, inputs, data, best * (1 + h)) - _loss_at(model, guide, inputs, data,
                                                                              best * (1 - h))) / (2 * h)
    assert abs(slope) < 1e-3 * abs(losses[1.0]) + 1e-3


def test_the_step_never_raises_the_noise():
    model, guide, inputs, data = _observed_chain(noise=1e-4)
    low = float(model.likelihoods["y"].variance.detach())
    step = NoiseStep(model, guide, inputs, data)
    assert step() == {} and step.taken == 0
    assert float(model.likelihoods["y"].variance.detach()) == low


def test_the_step_clears_adams_momentum_of_the_noise_only():
    model, guide, inputs, data = _observed_chain()
    raw = model.likelihoods["y"].variance_unconstrained
    other = model.kernels["y"].lengthscale_unconstrained if hasattr(model.kernels["y"], "lengthscale_unconstrained") \
        else next(p for p in model.kernels["y"].parameters())
    optim = ForeachAdam([{"params": [raw, other], "lr": 0.01}])
    raw.grad = torch.ones_like(raw)
    other.grad = torch.ones_like(other)
    optim.step()
    assert float(optim._moments[id(raw)][0].abs().sum()) > 0
    NoiseStep(model, guide, inputs, data)(optim)
    assert float(optim._moments[id(raw)][0].abs().sum()) == 0
    assert float(optim._moments[id(other)][0].abs().sum()) > 0


def test_held_noise_is_left_alone():
    model, guide, inputs, data = _observed_chain()
    raw = model.likelihoods["y"].variance_unconstrained
    before = raw.detach().clone()
    assert NoiseStep(model, guide, inputs, data)(held={id(raw)}) == {}
    assert torch.equal(raw.detach(), before)


def test_hyperpriors_leave_the_noise_to_the_steps():
    pyro.clear_param_store()
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=5, priors="weakly_informative").double()
    x = torch.linspace(-1, 1, 20, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(x)
    model.setup({"x": x}, {"y": y})
    step = NoiseStep(model, AutoStructuredGuide(model), {"x": x}, {"y": y})
    assert not step.due(50) and step() == {}


def test_train_takes_the_step_and_reports_it():
    """On the mean-field chain whose noise starts 100x too large, train(noise_step=True) lowers it in closed form
    (TrainResult.noise_steps) and ends with a lower loss than with noise_step=False; the default "auto" runs as
    False for the first half of the steps and then takes the step (the DAGDGP with its structured guide); the switch
    is recorded."""
    def run(**kw):
        model, guide, inputs, data = _observed_chain(noise=5.0)
        pyro.set_rng_seed(1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = train(model, guide, inputs, data, num_steps=100, progress=False, start_hidden=False, collapse=False,
                      **kw)
        return model, r

    on_model, on = run(noise_step=True)
    off_model, off = run(noise_step=False)
    auto_model, auto = run()
    assert on.settings["noise_step"] is True and off.settings["noise_step"] is False and auto.settings["noise_step"] is True
    assert auto.losses[:50] == off.losses[:50] and auto.noise_steps >= 1   # (its one step follows step 100)
    assert float(auto_model.likelihoods["y"].variance.detach()) < 0.5 * float(off_model.likelihoods["y"].variance.detach())
    assert on.noise_steps >= 1 and off.noise_steps == 0
    assert float(on_model.likelihoods["y"].variance.detach()) < 0.5 * float(off_model.likelihoods["y"].variance.detach())
    assert sum(on.losses[-20:]) < sum(off.losses[-20:])


def test_noise_step_must_be_a_bool():
    from pyro_dag.infer.training import TrainConfig

    with pytest.raises(ValueError, match="noise_step must be .auto., True or False"):
        TrainConfig(num_steps=10, noise_step=1)


def test_noise_step_where_it_cannot_run_is_refused_or_named():
    """noise_step=True with a guide that is not the DAGDGP's structured guide, or data-parallel, is refused by name
    (it used to train without the step, without a word); on a model where no node is eligible (latent inputs) it
    warns."""
    from pyro.infer.autoguide import AutoNormal

    x = torch.linspace(-1, 1, 12, dtype=torch.float64).unsqueeze(-1)
    pyro.clear_param_store()
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=4).double()
    with pytest.raises(ValueError, match="noise_step=True needs an AutoStructuredGuide.*AutoNormal.*noise_step=False"):
        train(model, AutoNormal(model), {"x": x}, {"y": torch.sin(x)}, num_steps=2, progress=False, noise_step=True)
    with pytest.raises(ValueError, match="noise_step steps are not data-parallel.*noise_step=False with distributed=True"):
        train(model, AutoStructuredGuide(model), {"x": x}, {"y": torch.sin(x)}, num_steps=2, progress=False,
              noise_step=True, distributed=True)
    pyro.clear_param_store()
    latent = DAGDGP(nx.DiGraph([("h", "y"), ("x", "y")]), num_inducing=4, latent_inputs={"h": 1}).double()
    with pytest.warns(UserWarning, match="noise_step=True does nothing here: the model has latent inputs"):
        train(latent, AutoStructuredGuide(latent), {"x": x}, {"y": torch.sin(x)}, num_steps=2, progress=False,
              noise_step=True, collapse=False, start_hidden=False)

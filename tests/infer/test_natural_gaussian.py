"""GaussianNaturalGradient: natural-gradient steps on the whole inducing posterior, checked against exact
results in float64 (pure-KL step, conjugate optimum, structure kept, dense = sparse)."""
import networkx as nx
import pyro
import pytest
import torch
from pyro import poutine

from helpers import chain_problem, collider_problem, fixed, setup_guide
from pyro_dag import DAGDGP
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import DAGELBO, GaussianNaturalGradient
from pyro_dag.infer import SinkNaturalGradient

GUIDES = [("mean_field", "dense"), ("chordal", "dense"), ("chordal", "sparse"), ("full", "dense")]


def _moments(guide):
    ng = GaussianNaturalGradient.__new__(GaussianNaturalGradient)
    ng.guide = guide
    m, lam, _ = ng._moments()
    return m.detach().clone(), lam.detach().clone()


@pytest.mark.parametrize("structure,backend", GUIDES)
def test_step_without_observations_moves_towards_the_prior_exactly(structure, backend):
    """With the likelihood scaled away the ELBO is -KL(q || N(0, I)), whose natural-gradient step is exact and
    deterministic: Λ ← (1-γ) Λ + γ I and Λm ← (1-γ) Λm."""
    pyro.clear_param_store()
    model, inputs, data = collider_problem()
    fixed(model)
    guide = setup_guide(model, inputs, data, structure=structure, backend=backend)
    m0, lam0 = _moments(guide)
    gamma = 0.3
    no_likelihood = poutine.scale(model, scale=1e-20)  # the KL is added by DAGELBO outside the model's sites
    GaussianNaturalGradient(no_likelihood, guide, DAGELBO(num_particles=2), step_size=gamma).step(inputs, data)
    m1, lam1 = _moments(guide)
    torch.testing.assert_close(lam1, (1 - gamma) * lam0 + gamma * torch.eye(lam0.shape[0], dtype=lam0.dtype),
                               rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(lam1 @ m1, (1 - gamma) * lam0 @ m0, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("structure,backend", GUIDES)
def test_full_step_reaches_the_conjugate_optimum(structure, backend):
    """Root parents and a Gaussian likelihood: the optimum is Titsias' closed form (given exactly by
    SinkNaturalGradient with γ = 1); one γ = 1 step from a random guide lands on it up to Monte Carlo error."""
    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 20, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(2 * x) + 0.1 * torch.randn_like(x)
    y[3] = float("nan")
    model = DAGDGP(nx.DiGraph([("x", "f")]), num_inducing=6, likelihoods={"f": Gaussian(0.02)}).double()
    inputs, data = {"x": x}, {"f": y}

    pyro.clear_param_store()
    ref = setup_guide(model, inputs, data, structure=structure, backend=backend)
    SinkNaturalGradient(model, ref, step_size=1.0, num_samples=1).step(inputs, data)
    m_opt, lam_opt = _moments(ref)

    pyro.clear_param_store()
    pyro.set_rng_seed(1)
    guide = setup_guide(model, inputs, data, structure=structure, backend=backend)
    GaussianNaturalGradient(model, guide, DAGELBO(num_particles=4000, antithetic=True), step_size=1.0).step(
        inputs, data)
    m1, lam1 = _moments(guide)
    # the precision is estimated from S = 4000 draws (relative error ~ 1/sqrt(S)), the mean then follows it
    assert (lam1 - lam_opt).norm() / lam_opt.norm() < 0.05
    assert (m1 - m_opt).norm() / m_opt.norm() < 0.05
    # and a second, small step from the optimum stays there (the expected natural gradient vanishes)
    GaussianNaturalGradient(model, guide, DAGELBO(num_particles=4000, antithetic=True), step_size=0.1).step(
        inputs, data)
    m2, lam2 = _moments(guide)
    assert (m2 - m1).norm() / m1.norm() < 0.01


def _deep_chain():
    """x -> a -> b -> c with c observed: H is the path a - b - c (no a - c block)."""
    g = torch.Generator().manual_seed(0)
    x = torch.linspace(-1.5, 1.5, 10, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(2 * x) + 0.1 * torch.randn(10, 1, dtype=torch.float64, generator=g)
    model = DAGDGP(nx.DiGraph([("x", "a"), ("a", "b"), ("b", "c")]), num_inducing=4,
                   likelihoods={"c": Gaussian(0.01)}).double()
    fixed(model)
    return model, {"x": x}, {"c": y}


def test_step_keeps_the_chordal_pattern_and_dense_equals_sparse():
    """The update lives on H (no a - c coupling appears) and both backends take the same step."""
    model, inputs, data = _deep_chain()
    out = {}
    for backend in ("dense", "sparse"):
        pyro.clear_param_store()
        guide = setup_guide(model, inputs, data, structure="chordal", backend=backend)
        assert set(map(frozenset, guide.family.edges)) == {frozenset("ab"), frozenset("bc")}
        ng = GaussianNaturalGradient(model, guide, DAGELBO(num_particles=3), step_size=0.05)
        pyro.set_rng_seed(3)
        for _ in range(3):
            ng.step(inputs, data)
        out[backend] = _moments(guide)
        fam = guide.family
        a, c = fam.block_of["a"].slice, fam.block_of["c"].slice
        assert out[backend][1][a][:, c].abs().max() == 0
    torch.testing.assert_close(out["sparse"][0], out["dense"][0], rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(out["sparse"][1], out["dense"][1], rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("positive_curvature", [False, True])
def test_steps_raise_the_elbo_on_a_latent_chain(positive_curvature):
    """Small steps from a randomised guide increase the (averaged) ELBO on a model with a latent node."""
    pyro.clear_param_store()
    model, inputs, data = chain_problem()
    fixed(model)
    guide = setup_guide(model, inputs, data, structure="chordal")
    elbo = DAGELBO(num_particles=64)
    pyro.set_rng_seed(0)
    before = sum(elbo.loss(model, guide, inputs, data) for _ in range(5)) / 5
    ng = GaussianNaturalGradient(model, guide, DAGELBO(num_particles=16, antithetic=True), step_size=0.05,
                                 positive_curvature=positive_curvature)
    for _ in range(80):
        ng.step(inputs, data)
    after = sum(elbo.loss(model, guide, inputs, data) for _ in range(5)) / 5
    assert after < 0.1 * before
    assert ng.last_step_size is not None and ng.last_step_size > 0


def test_positive_curvature_keeps_the_precision_above_the_damped_prior():
    """With the curvature estimate projected on the PSD cone, Λ' ⪰ (1-γ) Λ + γ I (no backtracking needed)."""
    pyro.clear_param_store()
    model, inputs, data = chain_problem()
    fixed(model)
    guide = setup_guide(model, inputs, data, structure="full")
    pyro.set_rng_seed(0)
    ng = GaussianNaturalGradient(model, guide, DAGELBO(num_particles=2), step_size=0.5, positive_curvature=True)
    for _ in range(5):
        _, lam0 = _moments(guide)
        ng.step(inputs, data)
        _, lam1 = _moments(guide)
        assert ng.last_step_size == 0.5
        floor = 0.5 * lam0 + 0.5 * torch.eye(lam0.shape[0], dtype=lam0.dtype)
        assert torch.linalg.eigvalsh(lam1 - floor).min() > -1e-8


def test_bad_input():
    pyro.clear_param_store()
    model, inputs, data = chain_problem()
    guide = setup_guide(model, inputs, data, structure="chordal")
    with pytest.raises(ValueError, match="step_size"):
        GaussianNaturalGradient(model, guide, step_size=0.0)
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    with pytest.raises(RuntimeError, match="run the guide once"):
        GaussianNaturalGradient(model, AutoStructuredGuide(model), step_size=0.1)
    ng = GaussianNaturalGradient(model, guide, step_size=0.1)
    names = ng.param_names()
    assert any(n.endswith("offdiag.e0") for n in names) and any(n.endswith("locs.b") for n in names)
    args = ng.optim_args({"lr": 0.01})
    assert args(next(iter(names)))["lr"] == 0.0 and args("other")["lr"] == 0.01


def test_gaussian_kl_matches_torch():
    from torch.distributions import MultivariateNormal, kl_divergence

    from pyro_dag.infer.natural import gaussian_kl as _gaussian_kl

    g = torch.Generator().manual_seed(0)
    P = 6
    a0, a1 = (torch.randn(P, P, dtype=torch.float64, generator=g) for _ in range(2))
    lam0, lam1 = a0 @ a0.T + P * torch.eye(P, dtype=torch.float64), a1 @ a1.T + torch.eye(P, dtype=torch.float64)
    m0, m1 = (torch.randn(P, dtype=torch.float64, generator=g) for _ in range(2))
    ref = kl_divergence(MultivariateNormal(m1, precision_matrix=lam1), MultivariateNormal(m0, precision_matrix=lam0))
    got = _gaussian_kl(m1, torch.linalg.cholesky(lam1), m0, torch.linalg.cholesky(lam0))
    assert abs(got - ref.item()) < 1e-10


def test_max_kl_bounds_each_step():
    """From the untrained collider guide an unconstrained γ = 0.5 step moves q by far more than 1 nat;
    with max_kl = 1 every step stays within it (γ halved as needed)."""
    from pyro_dag.infer.natural import gaussian_kl as _gaussian_kl

    pyro.clear_param_store()
    model, inputs, data = collider_problem(noise=0.02)
    fixed(model)
    guide = setup_guide(model, inputs, data, structure="chordal")
    pyro.set_rng_seed(0)
    ng = GaussianNaturalGradient(model, guide, DAGELBO(num_particles=4), step_size=0.5, max_kl=1.0)
    taken = []
    for _ in range(5):
        m0, lam0 = _moments(guide)
        ng.step(inputs, data)
        m1, lam1 = _moments(guide)
        kl = _gaussian_kl(m1, torch.linalg.cholesky(lam1), m0, torch.linalg.cholesky(lam0))
        assert kl <= 1.0 + 1e-9
        taken.append(ng.last_step_size)
    assert min(taken) < 0.5  # the trust region was active
    with pytest.raises(ValueError, match="max_kl"):
        GaussianNaturalGradient(model, guide, step_size=0.1, max_kl=0.0)


@pytest.mark.parametrize("backend", ["dense", "sparse"])
def test_generic_pyro_model_step_with_trace_elbo_reaches_the_exact_posterior(backend):
    """On a plain Pyro model (no DAGDGP) with Trace_ELBO: the posterior of a linear-Gaussian chain lies in the
    chordal family, and one γ = 1 natural-gradient step from the initial guide lands on it up to Monte Carlo
    error (the natural gradient of a Gaussian target is exact in one step)."""
    from helpers import linear_gaussian_chain

    from pyro_dag.infer.autoguide import AutoStructuredGuide

    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model, prec, mean, _ = linear_gaussian_chain()
    guide = AutoStructuredGuide(model, precision="chordal", backend=backend)
    guide()
    # the reparameterised gradient of Trace_ELBO (entropy included) is noisy from the broad initial guide
    elbo = pyro.infer.Trace_ELBO(num_particles=40000, vectorize_particles=True)
    GaussianNaturalGradient(model, guide, elbo, step_size=1.0).step()
    m1, lam1 = _moments(guide)
    idx = [int(guide._site_names[b.node].split("_")[1]) for b in guide.family.blocks]
    exact_prec, exact_mean = prec[idx][:, idx], mean[idx]
    assert (lam1 - exact_prec).norm() / exact_prec.norm() < 0.05
    assert (m1 - exact_mean).norm() / exact_mean.norm() < 0.05


@pytest.mark.parametrize("backend", ["dense", "sparse"])
def test_moment_form_gradients_equal_the_parameter_form(backend):
    """Under DAGELBO's conditional sampler the step differentiates a moment-form posterior (leaf Σ, the KL's
    gradient added in closed form); with the same random numbers this gives the gradients obtained through a
    posterior built from a leaf Λ (the path every other estimator takes), on a latent collider."""
    pyro.clear_param_store()
    model, inputs, data = collider_problem()
    fixed(model)
    guide = setup_guide(model, inputs, data, structure="chordal", backend=backend)
    ng = GaussianNaturalGradient(model, guide, DAGELBO(num_particles=3), step_size=0.1)
    assert ng._conditional_dagelbo()
    pyro.set_rng_seed(11)
    moment = ng._moment_gradients((inputs, data), {})
    pyro.set_rng_seed(11)
    reference = ng._parameter_gradients((inputs, data), {})
    torch.testing.assert_close(moment[0], reference[0], rtol=1e-10, atol=1e-8)       # the loss
    torch.testing.assert_close(moment[1], reference[1], rtol=1e-8, atol=1e-8)        # ∂L/∂m
    sym = [0.5 * (g + g.T) * ng._mask for g in (moment[2], reference[2])]             # ∂L/∂Σ on H
    assert sym[1].abs().max() > 1e-3
    torch.testing.assert_close(sym[0], sym[1], rtol=1e-8, atol=1e-8 * sym[1].abs().max().item())
    torch.testing.assert_close(moment[3], reference[3], rtol=1e-12, atol=1e-12)      # Λ

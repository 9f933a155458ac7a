import networkx as nx
import numpy as np
import pandas as pd
import pyro
import pytest
import torch
from pyro import poutine

from pyro_dag.sem import AutoCaseGaussian, LatentSEM, sem_guide

IND = {"A": ["a1", "a2", "a3"], "B": ["b1", "b2", "b3"], "C": ["c1", "c2", "c3"]}


def frame(n=10, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = a ** 2 + 0.3 * rng.normal(size=n)
    c = a - b + 0.3 * rng.normal(size=n)
    cols = {}
    for lat, v in zip("ABC", (a, b, c)):
        for i, col in enumerate(IND[lat]):
            cols[col] = (1 + 0.1 * i) * v + 0.4 * rng.normal(size=n)
    return pd.DataFrame(cols)


def model_and_local_guide():
    df = frame()
    model = LatentSEM(nx.DiGraph([("A", "B"), ("A", "C"), ("B", "C")]), IND, num_inducing=3)
    model(df)
    local = AutoCaseGaussian(poutine.block(model, expose=["A.x", "B.x", "C.x"]), latents=model.latents,
                             init_loc_fn=model.init_loc_fn, init_values=model.initial_latent_values,
                             create_plates=model.create_plates)
    local(df)
    gen = torch.Generator().manual_seed(0)
    coupling = torch.randn(local.coupling.shape, generator=gen, dtype=torch.float64)
    coupling[:, 1, 0] = 1.5  # B moves with A in every case
    local.loc = local.loc.detach() + torch.randn(local.loc.shape, generator=gen, dtype=torch.float64)
    local.coupling = coupling
    local.scale = torch.rand(local.scale.shape, generator=gen, dtype=torch.float64) + 0.5
    return model, local, df


def test_case_gaussian_density_is_the_full_covariance_gaussian():
    """The chain of Normals is the multivariate normal N(m_d, Σ_d) with Σ_d = covariance(): log-densities agree
    case by case, and sampled moments match (Monte Carlo)."""
    model, local, df = model_and_local_guide()
    cov = local.covariance()  # [n, 3, 3]
    assert cov.shape == (10, 3, 3)
    tr = poutine.trace(local).get_trace(df)
    tr.compute_log_prob()
    x = torch.stack([tr.nodes[f"{v}.x"]["value"] for v in "ABC"], -1)  # [n, 3]
    lp = sum(tr.nodes[f"{v}.x"]["log_prob"] for v in "ABC")  # [n]
    ref = torch.distributions.MultivariateNormal(local.loc.detach(), cov).log_prob(x.detach())
    torch.testing.assert_close(lp.detach(), ref)
    assert bool((cov[:, 0, 1].abs() > 0.05).all())  # the latents of a case are coupled
    draws = torch.stack([torch.stack(list(local(df).values()), -1) for _ in range(3000)]).detach()  # [S, n, 3]
    emp = torch.einsum("snv,snw->nvw", draws - draws.mean(0), draws - draws.mean(0)) / 2999
    torch.testing.assert_close(emp, cov, rtol=0.15, atol=0.15 * float(cov.abs().max()))


def test_case_gaussian_follows_the_subsample_and_starts_from_all_cases():
    model, local, df = model_and_local_guide()
    idx = torch.tensor([7, 2, 5])
    local.scale = torch.full(local.scale.shape, 1e-8, dtype=torch.float64)
    plate_tr = poutine.trace(local).get_trace(df, subsample=idx)
    np.testing.assert_allclose(plate_tr.nodes["A.x"]["value"].detach().numpy(), local.loc[idx, 0].detach().numpy(),
                               atol=1e-6)
    # a guide first called on a minibatch still starts every case at its own initial value (no periodic repeat)
    fresh = sem_guide(model)
    fresh(df, subsample_size=4)
    init = model.initial_latent_values()
    part = fresh[-1]
    assert isinstance(part, AutoCaseGaussian)
    torch.testing.assert_close(part.loc[:, 1].detach(), init["B"])


def test_sem_guide_options():
    model, _, df = model_and_local_guide()
    point = sem_guide(model)
    point(df)
    assert "B.xbar" in point[1].median(df) and "B.xbar" not in point[0].median(df)
    pyro.clear_param_store()  # both guides name their parameters alike in Pyro's global store
    random = sem_guide(model, pseudo_inputs="random", local="mean_field")
    random(df)
    assert len(random) == 2 and "B.xbar" in random[0].median(df)
    with pytest.raises(ValueError, match="local"):
        sem_guide(model, local="full")
    with pytest.raises(ValueError, match="pseudo_inputs"):
        sem_guide(model, pseudo_inputs="fixed")
    with pytest.raises(ValueError, match="expects exactly"):
        AutoCaseGaussian(model, latents=model.latents, init_loc_fn=model.init_loc_fn)(df)

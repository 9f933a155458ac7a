"""Shared pieces of the GPSEM-LV benchmarks (Silva & Gramacy 2010, arXiv:1002.4802, Sec. 5): fitting a
:class:`~pyro_dag.sem.LatentSEM` by SVI or NUTS, and the GPLVM baseline (``pyro.contrib.gp.models.GPLVM``)."""
import math
import time

import numpy as np
import pyro
import pyro.contrib.gp as gp
import torch
from pyro.infer import MCMC, NUTS, SVI, Trace_ELBO

from pyro_dag.sem.guides import sem_guide
from pyro_dag.sem.predict import guide_samples


def fit_svi(model, df, num_steps=4000, lr=0.02, num_samples=200, seed=0, subsample_size=None, guide_kwargs=None):
    """SVI with :func:`~pyro_dag.sem.guides.sem_guide` (ClippedAdam, learning rate decayed 10x over the run; a run
    that diverges to NaN is restarted with half the learning rate, at most twice, and ``fit_svi.last_lr`` records
    the rate used, ``fit_svi.last_guide`` the guide); ``guide_kwargs`` go to :func:`sem_guide`; returns
    ``(samples {site: [S, ...]}, seconds)``."""
    t = time.perf_counter()
    for attempt in range(3):  # a diverged run (NaN) restarts from scratch with half the learning rate
        pyro.clear_param_store()
        pyro.set_rng_seed(seed)
        guide = sem_guide(model, **(guide_kwargs or {}))
        optim = pyro.optim.ClippedAdam({"lr": lr, "lrd": 0.1 ** (1 / num_steps)})
        svi = SVI(model, guide, optim, Trace_ELBO())
        try:
            for _ in range(num_steps):
                svi.step(df, subsample_size=subsample_size)
            break
        except ValueError:
            if attempt == 2:
                raise
            print(f"SVI diverged at lr {lr}; restarting with lr {lr / 2}", flush=True)
            lr = lr / 2
    samples = guide_samples(model, guide, df, num_samples=num_samples)
    fit_svi.last_lr, fit_svi.last_guide = lr, guide
    return samples, time.perf_counter() - t


def fit_nuts(model, df, warmup=300, num_samples=300, max_tree_depth=7, seed=0, jitter=0.0, init_values=None):
    """NUTS (JIT-compiled potential) from :meth:`~pyro_dag.sem.LatentSEM.init_loc_fn`; ``jitter`` perturbs the
    starting point (for several chains); ``init_values`` ``{site name: tensor}`` replaces the start of the sites it
    names (taken as given, not jittered), so that two models can start their shared sites at the same values.
    Returns ``(samples, seconds, mcmc)``."""
    pyro.set_rng_seed(seed)
    model(df)  # fit the standardisation
    base = model.init_loc_fn
    gen = torch.Generator().manual_seed(seed)
    init_values = init_values or {}

    def init(site):
        if site["name"] in init_values:
            return init_values[site["name"]].clone()
        v = base(site)
        if jitter and not site["name"].endswith(".xbar"):
            return v + jitter * torch.randn(v.shape, generator=gen, dtype=v.dtype) * (v.abs() + 0.1) \
                if site["fn"].support is torch.distributions.constraints.real else v
        return v

    kernel = NUTS(model, init_strategy=init, max_tree_depth=max_tree_depth, jit_compile=True,
                  ignore_jit_warnings=True)
    mcmc = MCMC(kernel, warmup_steps=warmup, num_samples=num_samples, disable_progbar=True)
    t = time.perf_counter()
    mcmc.run(df)
    return mcmc.get_samples(), time.perf_counter() - t, mcmc


def fit_gplvm(Y, latent_dim=2, num_inducing=50, num_steps=3000, lr=0.01, seed=0):
    """GPLVM (Lawrence 2005) with an ARD RBF kernel, sparse (``SparseGPRegression``, ``num_inducing`` active
    points), latent prior ``N(0, I)``, on standardised ``Y [n, J]`` (a tensor). Returns the trained ``GPLVM``."""
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    Yc = Y - Y.mean(0)
    U, S, _ = torch.linalg.svd(Yc, full_matrices=False)
    X0 = U[:, :latent_dim] * math.sqrt(Y.shape[0])  # PCA init, unit variance
    kernel = gp.kernels.RBF(input_dim=latent_dim, lengthscale=torch.ones(latent_dim, dtype=Y.dtype))
    idx = torch.randperm(Y.shape[0], generator=torch.Generator().manual_seed(seed))[:num_inducing]
    Xu = X0[idx].clone()
    sgpr = gp.models.SparseGPRegression(X0.clone(), Y.T, kernel, Xu, noise=torch.tensor(0.1, dtype=Y.dtype),
                                        jitter=1e-5)
    model = gp.models.GPLVM(sgpr)
    gp.util.train(model, optimizer=torch.optim.Adam(model.parameters(), lr=lr), num_steps=num_steps)
    model.mode = "guide"
    return model


@torch.no_grad()
def gplvm_log_likelihood(model, Y_test, num_latent_samples=2000, seed=0):
    """Per-case ``log p(y*)`` of a trained GPLVM: the test latent is integrated out by Monte Carlo over
    ``x* ~ N(0, I)`` (the GPLVM prior) and ``y* | x*`` is the sparse GP's predictive ``N(μ(x*), σ²(x*) + noise)``
    (independent outputs). ``Y_test [n, J]`` on the training standardisation; returns ``[n]``."""
    torch.manual_seed(seed)
    gpm = model.base_model
    gpm.set_data(model.X_loc.detach(), gpm.y)
    K = num_latent_samples
    xs = torch.randn(K, model.X_loc.shape[1], dtype=Y_test.dtype)
    mean, var = gpm(xs, full_cov=False, noiseless=False)  # [J, K]
    lp = -0.5 * ((Y_test.T.unsqueeze(-1) - mean.unsqueeze(1)) ** 2 / var.unsqueeze(1)
                 + torch.log(2 * math.pi * var.unsqueeze(1)))  # [J, n, K]
    lp = lp.sum(0)  # [n, K]
    return (torch.logsumexp(lp, -1) - math.log(K)).numpy()


def best_rotation_quadratic_corr(Z, num_angles=180):
    """``max_θ corr(z'_2, z'_1²)`` over rotations ``z' = R(θ) z`` of a 2-D embedding ``Z [n, 2]`` (centred), for the
    GPLVM baseline, whose latents are identified only up to rotation."""
    Z = Z - Z.mean(0)
    best = -1.0
    for th in np.linspace(0, 2 * np.pi, num_angles, endpoint=False):
        c, s = np.cos(th), np.sin(th)
        z1 = c * Z[:, 0] - s * Z[:, 1]
        z2 = s * Z[:, 0] + c * Z[:, 1]
        best = max(best, float(np.corrcoef(z2, z1 ** 2)[0, 1]))
    return best

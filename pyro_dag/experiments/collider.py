"""The latent-collider experiment of the DAG-DGP paper: the model, its fit, evaluation and figure
(:func:`pyro_dag.plot.plot_collider`, re-exported here).

Perlino, Hamelijnck, Johansen & Damoulas (2026), "Deep Gaussian Processes on Directed Acyclic Graphs",
arXiv:2607.09645, App. G.3 (Table 1, Fig. 4). Used by ``pyro-dag fit collider``, the collider tutorial and the
collider benchmarks; the data come from :func:`pyro_dag.datasets.collider`. The protocol is the paper's: true
kernels, noise 0.015² and inducing inputs fixed; only the variational parameters are trained with Adam
(lr 0.01), 4 ancestral samples per step, full batch, float64.

Metrics (all against the noise-free child surface, on the observed "train" cases and on the held-out
"test" cases):

* ``rmse`` of the posterior mean of the child's latent values ``F_w3``;
* ``crps``: the sample CRPS ``E|F - f| - ½E|F - F'|`` of the posterior samples of ``F_w3`` against the
  noise-free value ``f`` (no observation noise is added, since the target is noise-free);
* ``nlpd``: negative log density of the noisy held-out observations under the predictive mixture;
* ``mean_abs_corr``: mean over cases of ``|corr(w1, w2)|`` across posterior samples (explaining-away);
* ``parent_var``: mean posterior variance of ``w1`` and ``w2`` over cases.
"""
import math
import numbers

import pyro
import torch

from .. import kernels
from ..datasets.collider import CHILD_LENGTHSCALE, NOISE_SD, PARENT_LENGTHSCALE, collider
from ..dgp import DAGDGP
from ..gp.inducing import sobol_normal
from ..gp.likelihoods import Gaussian
from ..infer import DAGELBO
from ..infer.autoguide import AutoStructuredGuide
from ..infer.training import JointAdam, train
from ..metrics.regression import crps_samples, nlpd_mixture, rmse
from ..outputs import OutputSet
from ..plot import plot_collider
from ..threads import DEFAULT_NUM_THREADS, limit_threads
from ..utils import freeze
from ..utils import renamed_argument

__all__ = ["collider_model", "fit_collider", "collider_metrics", "plot_collider", "save_collider_outputs"]


def collider_model(dataset, num_inducing_child=49, fixed=True, seed=0):
    """The paper's collider model (arXiv:2607.09645, App. G.3): true kernels, a sum-input child kernel
    (:class:`~pyro_dag.kernels.SumInput`), Gaussian noise 0.015².

    Inducing inputs: 15 per parent, evenly spread over its root's range, and ``num_inducing_child`` for the
    child spread (scrambled Sobol) over the range of the parents' prior values, not on a regular grid
    (a symmetric grid has few distinct sums and is degenerate under the sum-input kernel).

    :param ColliderData dataset: from :func:`pyro_dag.datasets.collider`.
    :param int num_inducing_child: ``M`` of the child ``w3``.
    :param bool fixed: freeze kernel hyperparameters, noise and inducing inputs (the paper's protocol).
    :param int seed: seed of the Sobol points and of the model.
    :returns: a float64 :class:`~pyro_dag.DAGDGP` (not set up).
    """
    kern = {
        "w1": kernels.RBF(lengthscale=PARENT_LENGTHSCALE),
        "w2": kernels.RBF(lengthscale=PARENT_LENGTHSCALE),
        "w3": kernels.SumInput(kernels.RBF(lengthscale=CHILD_LENGTHSCALE)),
    }
    lo1, hi1 = float(dataset.x1_grid.min()), float(dataset.x1_grid.max())
    lo2, hi2 = float(dataset.x2_grid.min()), float(dataset.x2_grid.max())
    Z = {
        "w1": torch.linspace(lo1, hi1, 15, dtype=torch.float64).unsqueeze(-1),
        "w2": torch.linspace(lo2, hi2, 15, dtype=torch.float64).unsqueeze(-1),
        "w3": sobol_normal(num_inducing_child, 2, 1.0, seed=seed, dtype=torch.float64),
    }
    model = DAGDGP(dataset.graph, kernels=kern, num_inducing={"w1": 15, "w2": 15, "w3": num_inducing_child},
                   likelihoods={"w3": Gaussian(variance=NOISE_SD**2)}, inducing_inputs=Z,
                   learn_inducing=not fixed, seed=seed).double()
    if fixed:
        freeze(model.kernels)
        freeze(model.likelihoods)
    return model


class _JointAdam(JointAdam):
    """fit_collider's Adam step: :class:`~pyro_dag.infer.training.JointAdam` with one learning rate (kept for the
    collider benchmarks)."""

    def __init__(self, model, guide, elbo, lr):
        super().__init__(model, guide, elbo, {"lr": lr})
        self.lr = lr


STRUCTURES = ("chordal", "full", "mean_field")
BACKENDS = ("auto", "dense", "sparse")


def fit_collider(steps=3000, precision="chordal", backend="auto", seed=0, device="cpu", num_particles=4, lr=0.01,
                 init_scale=None, progress=True, num_eval_samples=500, dataset_seed=0, warm_start=0,
                 sampler="conditional", sink_step_size=0.0, antithetic=False, natural_gradient=0.0,
                 natural_gradient_after=1000, natural_gradient_max_kl=None, num_threads=DEFAULT_NUM_THREADS,
                 checkpoint=None, checkpoint_every=100, resume=False, structure=None):
    """Fit the paper's collider model (:func:`collider_model`) and evaluate it (:func:`collider_metrics`).

    :param int steps: optimisation steps in all (full batch), ``>= 1``.
    :param str precision: the guide's precision, ``"chordal"``, ``"full"`` or ``"mean_field"`` (``structure=`` is its
        old name).
    :param str backend: ``"auto"``, ``"dense"`` or ``"sparse"``. :param int seed: seed of the optimisation.
    :param str device: torch device. :param int num_particles: ancestral samples per step.
    :param float lr: Adam learning rate (``> 0``). :param init_scale: guide initial scale (default: 0.01 for the
        observed child, 1 (the prior) for the latent parents).
    :param bool progress: show a tqdm bar with the running ELBO.
    :param int num_eval_samples: posterior samples for the metrics and the returned prediction.
    :param int dataset_seed: seed of the generated data (the data set is the same for every method).
    :param int warm_start: for structured guides, the number of the ``steps`` spent first on a mean-field
        guide, which then initialises the structured one (means copied, latent nodes reset to the prior
        scale; :meth:`~pyro_dag.infer.autoguide.AutoStructuredGuide.warm_start`).
    :param str sampler: DAGELBO's sampler for the main (structured) phase: ``"conditional"`` or ``"joint"``.
    :param float sink_step_size: ``γ`` of a natural-gradient step on the child's block after every Adam step
        (:class:`~pyro_dag.infer.SinkNaturalGradient`, which then owns the child's mean and diagonal
        block; Adam trains the rest); ``0`` (default): Adam only, the paper's protocol.
    :param bool antithetic: DAGELBO's antithetic pairs (``num_particles`` must be even), in both phases.
    :param float natural_gradient: ``γ`` of :class:`~pyro_dag.infer.GaussianNaturalGradient` steps on the
        whole inducing posterior, which replace Adam after ``natural_gradient_after`` steps of the main phase
        (the same DAGELBO estimator); ``0`` (default): Adam only, the paper's protocol.
    :param int natural_gradient_after: Adam steps before the natural-gradient steps take over (``>= 0``).
    :param float natural_gradient_max_kl: trust region of the natural-gradient steps in nats
        (:class:`~pyro_dag.infer.GaussianNaturalGradient` ``max_kl``); ``None``: :func:`~pyro_dag.infer.train`'s
        default (2 nats, which no step of this problem reaches).
    :param num_threads: intra-op threads for the fit (:func:`pyro_dag.threads.limit_threads`; the caller's
        settings are restored afterwards); ``None`` keeps the process's settings.
    :param checkpoint: a file or directory for :func:`pyro_dag.infer.train`'s checkpoints (default none).
    :param int checkpoint_every: steps between checkpoints. :param bool resume: continue from ``checkpoint`` if it
        holds one (a killed run resumed this way gives the uninterrupted run's numbers).
    :returns: dict with ``metrics``, ``losses``, ``model``, ``guide``, ``data``, ``prediction`` and ``train`` (the
        :class:`~pyro_dag.infer.TrainResult`).
    :raises NonFiniteLossError: naming the step and the term, if a loss or a gradient is not finite.

    The training is :func:`pyro_dag.infer.train` with the paper's Adam (``recipe="adam"``) and the options above.
    """
    precision = renamed_argument("fit_collider", "structure", "precision", structure, precision, "chordal")
    _check_fit_arguments(steps, precision, backend, num_particles, lr, warm_start, sampler, sink_step_size,
                         antithetic, natural_gradient, natural_gradient_after)
    with limit_threads(num_threads):
        return _fit_collider(steps, precision, backend, seed, device, num_particles, lr, init_scale, progress,
                             num_eval_samples, dataset_seed, warm_start, sampler, sink_step_size, antithetic,
                             natural_gradient, natural_gradient_after, natural_gradient_max_kl, checkpoint,
                             checkpoint_every, resume)


def _check_fit_arguments(steps, precision, backend, num_particles, lr, warm_start, sampler, sink_step_size,
                         antithetic, natural_gradient, natural_gradient_after):
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
        raise ValueError(f"fit_collider: steps must be a positive integer, got {steps!r}")
    if precision not in STRUCTURES:
        raise ValueError(f"fit_collider: precision must be one of {STRUCTURES}, got {precision!r}")
    if backend not in BACKENDS:
        raise ValueError(f"fit_collider: backend must be one of {BACKENDS}, got {backend!r}")
    if sampler not in DAGELBO.SAMPLERS:
        raise ValueError(f"fit_collider: sampler must be one of {DAGELBO.SAMPLERS}, got {sampler!r}")
    if not (isinstance(lr, numbers.Real) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"fit_collider: lr must be a positive finite number, got {lr!r}")
    if isinstance(num_particles, bool) or not isinstance(num_particles, numbers.Integral) or num_particles < 1:
        raise ValueError(f"fit_collider: num_particles must be a positive integer, got {num_particles!r}")
    if antithetic and num_particles % 2:
        raise ValueError(f"fit_collider: antithetic pairs the samples, so num_particles must be even, got "
                         f"{num_particles}")
    if not isinstance(warm_start, numbers.Integral) or warm_start < 0:
        raise ValueError(f"fit_collider: warm_start must be a non-negative integer, got {warm_start!r}")
    if not isinstance(natural_gradient_after, numbers.Integral) or natural_gradient_after < 0:
        raise ValueError(f"fit_collider: natural_gradient_after must be a non-negative integer, got "
                         f"{natural_gradient_after!r}")
    for name, value in (("natural_gradient", natural_gradient), ("sink_step_size", sink_step_size)):
        if not (isinstance(value, numbers.Real) and 0 <= value <= 1):
            raise ValueError(f"fit_collider: {name} must be a step size in (0, 1] (0: off), got {value!r}")
    if natural_gradient and sink_step_size:
        raise ValueError("fit_collider: use either natural_gradient (the whole posterior) or sink_step_size "
                         "(the child only)")


def _fit_collider(steps, precision, backend, seed, device, num_particles, lr, init_scale, progress,
                  num_eval_samples, dataset_seed, warm_start, sampler, sink_step_size, antithetic, natural_gradient,
                  natural_gradient_after, natural_gradient_max_kl, checkpoint=None, checkpoint_every=100,
                  resume=False):
    device = torch.device(device)
    ds = collider(seed=dataset_seed)
    pyro.set_rng_seed(seed)
    pyro.clear_param_store()
    model = collider_model(ds).to(device)
    inputs = {k: v.to(device) for k, v in ds.inputs.items()}
    data = {k: v.to(device) for k, v in ds.data.items()}
    init_scale = {"w3": 0.01} if init_scale is None else init_scale
    if precision == "mean_field" or warm_start <= 0:
        warm_start = 0
    if warm_start >= steps:
        raise ValueError(f"fit_collider: warm_start ({warm_start}) must be smaller than steps ({steps})")
    guide = AutoStructuredGuide(model, precision=precision, backend=backend, init_scale=init_scale)
    model.setup(inputs, data)
    # The protocol holds kernels and inducing inputs fixed: train factorises each K(Z, Z) once for the whole run.
    elbo = DAGELBO(num_particles=num_particles, sampler=sampler, antithetic=antithetic)
    run = train(model, guide, inputs, data, num_steps=steps, recipe="adam", lr=lr, elbo=elbo,
                natural_gradient=natural_gradient, natural_gradient_after=natural_gradient_after,
                natural_gradient_max_kl=natural_gradient_max_kl, sink_step_size=sink_step_size,
                warm_start=warm_start, progress=progress, num_threads=None, fixed_kernels=True,
                checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume, name="fit_collider")
    losses = run.losses
    seconds, warm_seconds = run.seconds, run.warm_start_seconds
    main_steps = steps - max(warm_start, run.resumed_from)        # main-phase steps run by this call
    metrics = collider_metrics(model, guide, ds, inputs, num_eval_samples)
    metrics.update({"structure": precision, "backend": guide.family.resolved_backend()
                    if hasattr(guide.family, "resolved_backend") else "dense",
                    "steps": steps, "warm_start_steps": warm_start, "seed": seed, "num_particles": num_particles,
                    "lr": lr, "sink_step_size": sink_step_size, "sampler": sampler,
                    "antithetic": antithetic, "natural_gradient": natural_gradient,
                    "natural_gradient_after": natural_gradient_after if natural_gradient else None,
                    "natural_gradient_max_kl": natural_gradient_max_kl if natural_gradient else None,
                    "train_seconds": seconds,
                    "seconds_per_step_main": (seconds - warm_seconds) / max(1, main_steps),
                    "final_elbo": -sum(losses[-50:]) / len(losses[-50:]),
                    "device": str(device), "dtype": "float64"})
    with torch.no_grad():
        pred = model.predict(guide, inputs, num_samples=num_eval_samples)
    return {"metrics": metrics, "losses": losses, "model": model, "guide": guide, "data": ds, "prediction": pred,
            "train": run}


@torch.no_grad()
def collider_metrics(model, guide, ds, inputs, num_samples=500):
    """Child RMSE / CRPS (train and held-out), NLPD, mean absolute corr(w1, w2) and parent variances."""
    pred = model.predict(guide, inputs, num_samples=num_samples)
    truth = ds.truth["w3"].to(pred["w3"].mean)
    train = ds.train_mask.to(truth.device)
    out = {}
    f = pred["w3"].samples  # [S, n, 1]
    for split, mask in (("train", train), ("test", ~train)):
        out[f"rmse_{split}"] = rmse(pred["w3"].mean[mask], truth[mask]).item()
        out[f"crps_{split}"] = crps_samples(f[:, mask], truth[mask]).item()
    out["rmse_all"] = rmse(pred["w3"].mean, truth).item()
    noise_sd = model.likelihoods["w3"].variance.sqrt()
    y = ds.y_full.to(truth)
    out["nlpd_test"] = nlpd_mixture(pred["w3"].loc[:, ~train], (pred["w3"].var[:, ~train] + noise_sd**2).sqrt(),
                                    y[~train]).item()
    w1, w2 = pred["w1"].samples[..., 0], pred["w2"].samples[..., 0]
    c1, c2 = w1 - w1.mean(0), w2 - w2.mean(0)
    corr = (c1 * c2).mean(0) / (c1.pow(2).mean(0).sqrt() * c2.pow(2).mean(0).sqrt())
    out["mean_corr"] = corr.mean().item()
    out["mean_abs_corr"] = corr.abs().mean().item()
    out["parent_var_w1"] = pred["w1"].variance.mean().item()
    out["parent_var_w2"] = pred["w2"].variance.mean().item()
    out["parent_var"] = 0.5 * (out["parent_var_w1"] + out["parent_var_w2"])
    return out


def save_collider_outputs(result, out_dir):
    """Write ``collider_metrics.json`` and ``collider.png`` into ``out_dir``, each atomically; returns their paths.

    :raises pyro_dag.outputs.OutputError: naming the file that could not be written and the ones that were.
    """
    out = OutputSet(out_dir, ["collider_metrics.json", "collider.png"])
    metrics = {k: (v if not isinstance(v, float) or math.isfinite(v) else None)
               for k, v in result["metrics"].items()}
    metrics_path = out.json("collider_metrics.json", metrics, indent=2, sort_keys=True)
    fig_path = out.path("collider.png")
    out.call(["collider.png"], lambda: plot_collider(result, fig_path))
    return metrics_path, fig_path

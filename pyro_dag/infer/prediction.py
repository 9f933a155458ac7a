"""Posterior prediction of a :class:`~pyro_dag.DAGDGP` at new inputs, and the inference of latent inputs for
new cases (Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed Acyclic Graphs",
arXiv:2607.09645, Prop. 9 and Algorithms 1-3 of App. E.3).

:meth:`DAGDGP.predict <pyro_dag.DAGDGP.predict>` and :meth:`DAGDGP.infer_latent_inputs
<pyro_dag.DAGDGP.infer_latent_inputs>` hand off to :func:`predict` and :func:`infer_latent_inputs` here (the
model does not import inference code; this module registers itself with :mod:`pyro_dag.dgp.handoff`). What a guide
offers is read from the guide, not from its class:

* a guide (or a part of an ``AutoGuideList``) with an ``inducing_posterior()`` method (e.g.
  :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`): marginal ancestral sampling against its ``q(U)``;
* a part with an ``encode(X, obs, n)`` method (:class:`~pyro_dag.infer.autoguide.AutoLatentEncoder`): the amortised
  ``q(h)`` of the latent inputs;
* a guide with its own ``predict_dag(model, inputs, data, nodes, num_samples, mask)`` (e.g.
  :class:`~pyro_dag.infer.LatentMAP`): its own prediction;
* any other Pyro guide: ``U`` drawn from the guide, pushed through the DAG (plain ancestral sampling).
"""
import numpy as np
import pyro
import torch
from pyro.infer.autoguide import AutoGuideList

from ..dgp import handoff
from ..dgp.handoff import standard_normal, suspended
from ..dgp.inputs import DAGInputError, positive_int
from ..dgp.prediction import NodePrediction
from ..errors import NotFittedError
from ..progress import stage_progress
from .checks import NonFiniteLossError
from .factored_prediction import FactoredMeanFieldState, node_factors
from .marginal import marginal_pass, observed_input_parents

__all__ = ["predict", "infer_latent_inputs"]


def _check_finite_state(model, guide):
    """Refuse a model or guide with a NaN or infinite parameter (or buffer), e.g. after a diverged run: every
    prediction through it would be NaN."""
    for owner, module in (("guide", guide), ("model", model)):
        named = list(module.named_parameters()) + list(module.named_buffers()) \
            if hasattr(module, "named_parameters") else []
        for name, p in named:
            if p.is_floating_point() and not bool(torch.isfinite(p).all()):
                k = int((~torch.isfinite(p)).sum())
                raise NonFiniteLossError(
                    f"predict: the {owner}'s parameter {name!r} has {k} NaN or infinite entr{'y' if k == 1 else 'ies'} "
                    "(a diverged run?), so every prediction through it would be NaN; retrain (e.g. with a smaller "
                    "learning rate), or restore a checkpoint or a saved fit (pyro_dag.persist.load)")

@torch.no_grad()
def predict(model, guide, inputs, data=None, nodes=None, num_samples=200, batch_size=None, mask=None,
            latent_steps=300, latent_lr=0.05, latent_particles=16):
    """Posterior predictive of node values at new inputs: the implementation of :meth:`DAGDGP.predict
    <pyro_dag.DAGDGP.predict>` (``model.predict(guide, inputs, ...)`` is ``predict(model, guide, inputs, ...)``; the
    arguments, the return value and the methods by guide are documented there).

    Perlino et al. 2026, arXiv:2607.09645, Prop. 9 and Algorithms 1-3 of App. E.3.
    """
    if hasattr(guide, "predict_dag"):  # a guide with its own prediction (LatentMAP)
        return guide.predict_dag(model, inputs, data, nodes, num_samples, mask)
    X, n, obs = model.checked_arguments(inputs, data, mask)
    _require_setup(model)
    unfinished = getattr(guide, "_pyro_dag_unfinished_fit", None)
    if unfinished:
        raise NotFittedError(f"predict: {unfinished} was interrupted (or stopped by an error), so the guide holds a "
                             "partial fit: run train(...) again to finish it, or restore a checkpoint or a saved fit "
                             "(pyro_dag.persist.load)")
    _check_finite_state(model, guide)
    if data is not None and not model.latent_inputs:
        raise DAGInputError("predict: data is used only to infer latent inputs, and this model has none; drop "
                            "data (predictions propagate from the roots)")
    nodes = list(model.gp_nodes) if nodes is None else list(nodes)
    for w in nodes:
        if w not in model.gp_nodes and w not in model.latent_inputs:
            raise DAGInputError(f"cannot predict node {w!r}: it is not a GP node of the graph "
                                f"(GP nodes: {model.gp_nodes}" +
                                (f", latent inputs: {list(model.latent_inputs)})" if model.latent_inputs else ")"))
    num_samples = positive_int(num_samples, "num_samples")
    batch_size = _predict_batch_size(model, num_samples, batch_size)
    chunks = [(lo, min(lo + batch_size, n)) for lo in range(0, n, batch_size)]
    structured, encoder = _guide_parts(guide)
    if not model.latent_inputs:
        q_h = {}
    elif encoder is not None:
        q_h = _encode_latent_inputs(model, encoder, X, n, obs)
    else:
        q_h = _fit_latent_inputs(model, guide, inputs, X, n, obs, latent_steps, latent_lr, latent_particles)
    posterior = None
    if structured is not None:   # independent blocks where the guide has no coupling (after exact fits): cheaper
        family = getattr(structured, "family", None)
        posterior = (family.prediction_posterior() if hasattr(family, "prediction_posterior")
                     else structured.inducing_posterior())
    with suspended():
        # draws of the latent inputs for all cases first (so that chunking does not change them)
        hs = {h: loc + scale * standard_normal((num_samples,) + loc.shape, loc) for h, (loc, scale) in q_h.items()}
        if posterior is not None:
            cache = model.cholesky_cache()
            # one draw per (sample, case, node), in the order a single pass over all cases makes them; the
            # draws of a returned node are overwritten, chunk by chunk, by its samples
            noise = {w: standard_normal((num_samples, n, model.output_dims[w]), model._anchor)
                     for w in model.topo_nodes}
            # then the observation noise of the parents whose children were fitted on their observed values
            measured = {p: standard_normal((num_samples, n, model.output_dims[p]), model._anchor)
                        for p in observed_input_parents(model)}
            out = _PredictionBuffers(model, nodes, num_samples, n, samples={**noise, **hs})
            # one-output nodes at O(M r) per (sample, case) instead of O(M²), the dropped part bounded
            factors = node_factors(model, posterior, cache, getattr(model, "predict_factored_tolerance", None))
            bar = stage_progress(n, "prediction", unit="row") if len(chunks) > 1 else None
            for lo, hi in chunks:
                Xc = {r: X[r][lo:hi] for r in model.root_nodes}
                eps = {w: noise[w][:, lo:hi] for w in model.topo_nodes}
                latent = {h: v[:, lo:hi] for h, v in hs.items()}
                state = FactoredMeanFieldState(posterior, factors) if factors else None
                passes = marginal_pass(model, posterior, Xc, num_samples, cache=cache, noise=eps, latent=latent,
                                       input_noise={p: v[:, lo:hi] for p, v in measured.items()}, state=state)
                for w in nodes:
                    if w in model.gp_nodes:
                        out.fill(w, 0, lo, hi, *passes[w])
                if bar is not None:
                    bar.update(hi - lo)
            if bar is not None:
                bar.close()
        else:
            out = _PredictionBuffers(model, nodes, num_samples, n, samples=hs)
            for s in range(num_samples):
                latent = {h: v[s] for h, v in hs.items()}
                _predict_one_guide_sample(model, guide, inputs, X, n, chunks, out, s, latent)
        for h, (loc, scale) in q_h.items():
            if h in out.nodes:
                out.fill(h, 0, 0, n, hs[h], loc.expand(hs[h].shape), scale.pow(2).expand(hs[h].shape))
    return out.result(chunks)


@torch.no_grad()
def infer_latent_inputs(model, guide, inputs, data=None, mask=None, num_steps=300, lr=0.05, num_particles=16,
                        batch_size=None):
    """The latent inputs of (new) cases from the nodes observed for them, with the model and ``q(U)`` frozen: the
    implementation of :meth:`DAGDGP.infer_latent_inputs <pyro_dag.DAGDGP.infer_latent_inputs>` (arguments and return
    value documented there; Salimbeni, Dutordoir, Hensman & Deisenroth 2019, ICML).
    """
    X, n, obs = model.checked_arguments(inputs, data, mask)
    _require_setup(model)
    return _fit_latent_inputs(model, guide, inputs, X, n, obs, num_steps, lr, num_particles, batch_size)


def _require_setup(model):
    if not model.is_setup:
        raise NotFittedError("the model is not set up yet (it has never been trained): train it first, e.g. "
                             "train(model, guide, inputs, data, num_steps=...), or call model.setup(inputs, data)")


def _predict_batch_size(model, num_samples, batch_size):
    if batch_size is None:
        size = sum(model.output_dims[w] * model.num_inducing[w] for w in model.topo_nodes)
        return max(1, model.predict_chunk_elements // (num_samples * size))
    return positive_int(batch_size, "batch_size")


def _guide_parts(guide):
    """``(part with an inducing posterior, AutoLatentEncoder part)`` of a guide or an ``AutoGuideList`` (each
    ``None`` if absent)."""
    parts = list(guide) if isinstance(guide, AutoGuideList) else [guide]
    structured = next((p for p in parts if hasattr(p, "inducing_posterior")), None)
    encoder = next((p for p in parts if hasattr(p, "encode")), None)
    return structured, encoder


def _encode_latent_inputs(model, encoder, X, n, obs):
    """``q(h)`` of the cases from an :class:`~pyro_dag.infer.autoguide.encoder.AutoLatentEncoder` (one pass);
    cases with nothing observed keep the prior."""
    if encoder.prototype_trace is None:
        raise NotFittedError("predict: the AutoLatentEncoder has not been trained (run the guide once first)")
    kw = {"dtype": model.dtype, "device": model.device}
    q = {h: (torch.zeros((n, d), **kw), torch.ones((n, d), **kw)) for h, d in model.latent_inputs.items()}
    seen = torch.zeros(n, dtype=torch.bool, device=model.device)
    for w, (_, m) in obs.items():
        seen |= m.any(-1)
    if bool(seen.any()):
        idx = seen.nonzero().squeeze(-1)
        X_seen = {r: x[idx] for r, x in X.items()}
        encoded = encoder.encode(X_seen, {w: (y[idx], m[idx]) for w, (y, m) in obs.items()}, len(idx))
        for h, (loc, scale) in encoded.items():
            q[h][0][idx] = loc.detach()
            q[h][1][idx] = scale.detach()
    return q


def _fit_latent_inputs(model, guide, inputs, X, n, obs, num_steps, lr, num_particles, batch_size=None):
    num_steps = int(num_steps)
    if num_steps < 0:
        raise DAGInputError(f"latent_steps / num_steps must be >= 0, got {num_steps}")
    if not (float(lr) > 0 and np.isfinite(float(lr))):
        raise DAGInputError(f"latent_lr / lr must be a finite positive number, got {lr!r}")
    S = positive_int(num_particles, "latent_particles / num_particles")
    kw = {"dtype": model.dtype, "device": model.device}
    q = {h: (torch.zeros((n, d), **kw), torch.ones((n, d), **kw)) for h, d in model.latent_inputs.items()}
    seen = torch.zeros(n, dtype=torch.bool, device=model.device)
    for w, (_, m) in obs.items():
        seen |= m.any(-1)
    if num_steps == 0 or not bool(seen.any()):
        return q
    batch_size = _predict_batch_size(model, S, batch_size)
    structured, _ = _guide_parts(guide)
    posterior = None
    if structured is not None:   # independent blocks where the guide has no coupling (after exact fits): cheaper
        family = getattr(structured, "family", None)
        posterior = (family.prediction_posterior() if hasattr(family, "prediction_posterior")
                     else structured.inducing_posterior())
    with suspended():
        cache = {w: tuple(t.detach() for t in v) for w, v in model.cholesky_cache().items()}
        us = None
        if posterior is None:  # U drawn from the guide once, held fixed during the fit: [S, d_w, M_w]
            traces = [pyro.poutine.trace(guide).get_trace(inputs) for _ in range(S)]
            us = {w: torch.stack([t.nodes[f"{w}.u"]["value"].detach() for t in traces]) for w in model.topo_nodes}
        cases = seen.nonzero().squeeze(-1)
        for lo in range(0, len(cases), batch_size):
            idx = cases[lo:lo + batch_size]
            Xc = {r: X[r][idx] for r in model.root_nodes}
            obs_c = {w: (y[idx], m[idx]) for w, (y, m) in obs.items()}
            fitted = _fit_latent_chunk(model, posterior, us, Xc, obs_c, cache, len(idx), num_steps, lr, S)
            for h, (loc, scale) in fitted.items():
                q[h][0][idx] = loc
                q[h][1][idx] = scale
    return q


def _fit_latent_chunk(model, posterior, us, X, obs, cache, B, num_steps, lr, S):
    kw = {"dtype": model.dtype, "device": model.device}
    locs = {h: torch.zeros((B, d), **kw, requires_grad=True) for h, d in model.latent_inputs.items()}
    log_scales = {h: torch.zeros((B, d), **kw, requires_grad=True) for h, d in model.latent_inputs.items()}
    params = list(locs.values()) + list(log_scales.values())
    optim = torch.optim.Adam(params, lr=float(lr))
    with torch.enable_grad():
        for _ in range(num_steps):
            optim.zero_grad()
            latent, kl = {}, 0.0
            for h in model.latent_inputs:
                loc, log_s = locs[h], log_scales[h]
                scale = log_s.exp()
                latent[h] = loc + scale * torch.randn((S,) + loc.shape, **kw)
                kl = kl + 0.5 * (loc.pow(2) + scale.pow(2) - 1.0 - 2.0 * log_s).sum()
            if us is None:
                passes = marginal_pass(model, posterior, X, S, cache=cache, latent=latent)
            else:
                passes = _sampled_u_pass(model, us, X, latent, cache)
            ell = 0.0
            for w, (y, m) in obs.items():
                _, loc_w, var_w = passes[w]
                e = model.likelihoods[w].expected_log_prob(y, loc_w, var_w)
                ell = ell + torch.where(m, e, torch.zeros_like(e)).sum() / S
            loss = kl - ell
            if not bool(torch.isfinite(loss)):
                raise NonFiniteLossError(f"infer_latent_inputs: the loss of the latent fit is {float(loss)}; "
                                         "lower lr (latent_lr) or check the data of the new cases")
            # gradients of the local parameters only (the model's own .grad stay untouched)
            for p, g in zip(params, torch.autograd.grad(loss, params)):
                p.grad = g
            optim.step()
    return {h: (locs[h].detach(), log_scales[h].detach().exp()) for h in model.latent_inputs}


def _sampled_u_pass(model, us, X, latent, cache):
    """Ancestral pass with fixed draws ``us = {w: [S, d_w, M_w]}`` of the inducing outputs and latent inputs
    ``{h: [S, B, d_h]}``; ``{node: (f, loc, var)}`` ``[S, B, d_w]``."""
    values = dict(X)
    values.update(latent)
    out = {}
    for w in model.topo_nodes:
        a, r = model.node_conditional(w, values, cache)
        loc = a @ us[w].transpose(-1, -2)
        var = r.unsqueeze(-1).expand_as(loc)
        f = loc + var.sqrt() * torch.randn_like(loc)
        values[w] = f
        out[w] = (f, loc, var)
    return out


def _predict_one_guide_sample(model, guide, inputs, X, n, chunks, out, s, latent=None):
    """Sample ``s`` of :meth:`predict` with a guide that is not structured: one ``U`` from the guide, pushed
    through the DAG chunk by chunk (``latent``: ``{h: [n, d_h]}`` values of the latent inputs)."""
    latent = latent or {}
    guide_trace = pyro.poutine.trace(guide).get_trace(inputs)
    us = {w: guide_trace.nodes[f"{w}.u"]["value"] for w in model.topo_nodes}
    cache = model.cholesky_cache()
    noise = {w: torch.randn((n, model.output_dims[w]), dtype=model.dtype, device=model.device)
             for w in model.topo_nodes}
    for lo, hi in chunks:
        values = {r: X[r][lo:hi] for r in model.root_nodes}
        values.update({h: v[lo:hi] for h, v in latent.items()})
        for w in model.topo_nodes:
            a, r = model.node_conditional(w, values, cache)
            loc = a @ us[w].transpose(-1, -2)
            var = r.unsqueeze(-1).expand_as(loc)
            f = loc + var.sqrt() * noise[w][lo:hi]
            values[w] = f
            if w in out.nodes:
                out.fill(w, s, lo, hi, f.unsqueeze(0), loc.unsqueeze(0), var.unsqueeze(0))


class _PredictionBuffers:
    """Output tensors of :func:`predict`, filled chunk by chunk (samples ``[S, n, d]`` and moments)."""

    def __init__(self, model, nodes, num_samples, n, samples=None):
        self.model, self.nodes, self.num_samples = model, list(nodes), num_samples
        kw = {"dtype": model.dtype, "device": model.device}
        samples = samples or {}

        def buffer(w):
            d = model.latent_inputs[w] if w in model.latent_inputs else model.output_dims[w]
            return torch.empty((num_samples, n, d), **kw)

        self.draws = {w: (samples[w] if w in samples else buffer(w), buffer(w), buffer(w)) for w in self.nodes}

    def fill(self, w, s, lo, hi, f, loc, var):
        """Write ``f``, ``loc``, ``var`` ``[k, hi - lo, d]`` for samples ``s .. s + k`` and cases ``lo .. hi``."""
        for buf, v in zip(self.draws[w], (f, loc, var)):
            buf[s:s + v.shape[0], lo:hi] = v

    def result(self, chunks):
        """``{node: NodePrediction}``; the moments over the samples are computed chunk by chunk of cases."""
        out = {}
        for w in self.nodes:
            f, loc, var = self.draws[w]
            mean, variance = torch.empty_like(loc[0]), torch.empty_like(loc[0])
            y_mean = y_var = None
            for lo, hi in chunks:
                lc, vc = loc[:, lo:hi], var[:, lo:hi]
                mean[lo:hi] = lc.mean(0)
                variance[lo:hi] = vc.mean(0) + lc.var(0, unbiased=False)
                # latent inputs have no likelihood
                moments = self.model.likelihoods[w].predictive_moments(lc, vc) if w in self.model.gp_nodes else None
                if moments is not None:
                    ym, yv = moments
                    if y_mean is None:
                        y_mean, y_var = torch.empty_like(mean), torch.empty_like(mean)
                    y_mean[lo:hi] = ym.mean(0)
                    y_var[lo:hi] = yv.mean(0) + ym.var(0, unbiased=False)
            out[w] = NodePrediction(f, mean, variance, loc, var, y_mean, y_var)
        return out


handoff.register_prediction(predict, infer_latent_inputs)

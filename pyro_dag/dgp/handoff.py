"""The hand-off between an estimator, the guide and the model, as Pyro effect handlers; and the hand-off of
prediction to the inference code.

A :class:`~pyro_dag.DAGDGP` imports nothing from :mod:`pyro_dag.infer`: it talks to inference code through two
protocols defined here.

**Estimators.** :class:`~pyro_dag.infer.DAGELBO` evaluates the estimator of the DAG-DGP paper (Perlino,
Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed Acyclic Graphs", arXiv:2607.09645,
Eqs. 92-95 and Algorithm 4): the guide does not sample the inducing sites; it publishes its inducing posterior
``q(U)`` and the analytic KL to the active estimator, and the model, seeing an active :class:`Estimator`, hands its
run to :meth:`Estimator.forward_model` (marginal ancestral sampling, Prop. 9, against that ``q(U)``, recording the
expected log-likelihood of each observed node as a factor site).

The channel is Pyro's handler stack (``pyro.poutine.runtime._PYRO_STACK``), as for every cross-cutting
channel of Pyro's own inference code:

* an :class:`Estimator` is a :class:`~pyro.poutine.messenger.Messenger`; DAGELBO enters one
  (:class:`~pyro_dag.infer.context.MarginalEstimator`) around the guide and model runs of each evaluation;
* :class:`SuspendMessenger` (entered by :func:`suspended`) hides every estimator below it, so that the block
  runs as ordinary Pyro code (a guide's prototype trace, prediction);
* :func:`current_estimator` walks the stack from the innermost handler outwards and returns the first
  estimator it meets, or ``None`` if it meets a :class:`SuspendMessenger` first or there is none.

The lookup reads the stack rather than sending a message through it, so ``poutine.block`` (which stops
messages) around part of a model does not cut the model off from its estimator. Because the estimator lives on
the handler stack, Pyro's exception handling removes it when an evaluation fails, and two evaluations (two
DAGELBO instances, or one nested inside another) each see only their own, innermost estimator.

**Prediction.** :meth:`DAGDGP.predict <pyro_dag.DAGDGP.predict>` and :meth:`DAGDGP.infer_latent_inputs
<pyro_dag.DAGDGP.infer_latent_inputs>` call the functions that :mod:`pyro_dag.infer.prediction` registers with
:func:`register_prediction` when it is imported (as ``torch.distributions.kl.register_kl`` lets each family
register its KL), so that the model stays below the inference code.
"""
import importlib

import torch
from pyro.poutine.messenger import Messenger
from pyro.poutine.runtime import _PYRO_STACK

__all__ = ["Estimator", "SuspendMessenger", "current_estimator", "prediction", "register_prediction",
           "standard_normal", "suspended"]


class Estimator(Messenger):
    """Effect handler of an estimator that evaluates a :class:`~pyro_dag.DAGDGP`'s likelihood itself.

    While one is on the handler stack (and not hidden by :func:`suspended`), the model's ``forward`` checks its
    arguments, sets up the plates and the Gram factors, and then returns :meth:`forward_model` instead of running
    its generative program. It handles no Pyro message itself, so sites pass through it unchanged.
    """

    def forward_model(self, model, X, obs, plate, cache):
        """Run ``model`` under this estimator.

        :param model: the :class:`~pyro_dag.DAGDGP`. :param dict X: checked design matrices ``{root: [n, d_r]}``.
        :param dict obs: ``{node: (y [n, d_w], mask [n, d_w])}``. :param plate: the ``"data"`` plate.
        :param dict cache: the model's :meth:`~pyro_dag.DAGDGP.cholesky_cache`.
        :returns: ``{node: [..., B, d_w]}`` values of every GP node for the (sub)sampled cases.
        """
        raise NotImplementedError


class SuspendMessenger(Messenger):
    """Effect handler that hides every :class:`Estimator` below it on the stack (see :func:`suspended`)."""


def current_estimator():
    """The innermost active :class:`Estimator` on Pyro's handler stack, or ``None``.

    ``None`` also when a :func:`suspended` block is entered inside the estimator.
    """
    for frame in reversed(_PYRO_STACK):
        if isinstance(frame, Estimator):
            return frame
        if isinstance(frame, SuspendMessenger):
            return None
    return None


def suspended():
    """A :class:`SuspendMessenger`: run a block (or, as a decorator, a function) as ordinary Pyro code even
    inside a DAGELBO evaluation, e.g. a guide's prototype trace::

        with suspended():
            assert current_estimator() is None
    """
    return SuspendMessenger()


def standard_normal(shape, like, antithetic=False, dim=0):
    """``N(0, I)`` draws of ``shape`` with ``like``'s dtype and device; with ``antithetic`` the second half along
    ``dim`` is minus the first (``shape[dim]`` must be even).

    Antithetic pairs keep every draw's law (so estimates stay unbiased) and cancel the odd-order terms of the
    integrand's Taylor expansion in ``ε`` between the two halves (variance reduction for near-linear integrands).
    """
    if not antithetic:
        return torch.randn(shape, dtype=like.dtype, device=like.device)
    shape = list(shape)
    if shape[dim] % 2:
        raise ValueError(f"antithetic sampling needs an even number of samples, got {shape[dim]}")
    shape[dim] //= 2
    half = torch.randn(shape, dtype=like.dtype, device=like.device)
    return torch.cat([half, -half], dim=dim)


_PREDICTION = {}
#: The module whose import registers the prediction functions (:func:`register_prediction`).
PREDICTION_MODULE = "pyro_dag.infer.prediction"


def register_prediction(predict, infer_latent_inputs):
    """Register the functions behind :meth:`DAGDGP.predict <pyro_dag.DAGDGP.predict>` and
    :meth:`DAGDGP.infer_latent_inputs <pyro_dag.DAGDGP.infer_latent_inputs>`; called by
    :mod:`pyro_dag.infer.prediction` when it is imported.

    :param predict: ``predict(model, guide, inputs, data, nodes, num_samples, batch_size, mask, latent_steps,
        latent_lr, latent_particles)``.
    :param infer_latent_inputs: ``infer_latent_inputs(model, guide, inputs, data, mask, num_steps, lr,
        num_particles, batch_size)``.
    """
    _PREDICTION["predict"] = predict
    _PREDICTION["infer_latent_inputs"] = infer_latent_inputs


def prediction(name):
    """The registered prediction function ``name`` (``"predict"`` or ``"infer_latent_inputs"``).

    Imports :data:`PREDICTION_MODULE` (which registers them) at the first call.

    :raises RuntimeError: if that module registered nothing.
    """
    if name not in _PREDICTION:
        # loaded at the first predict, not when DAGDGP is imported (51 modules of pyro_dag.infer); by name,
        # so that the model still imports nothing from pyro_dag.infer
        importlib.import_module(PREDICTION_MODULE)
    if name not in _PREDICTION:
        raise RuntimeError(f"DAGDGP.{name} is implemented in pyro_dag.infer.prediction, which has not been imported: "
                           "import pyro_dag.infer (or use DAGDGP from the top-level package, pyro_dag.DAGDGP)")
    return _PREDICTION[name]

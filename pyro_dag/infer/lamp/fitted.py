"""The fitted state that LaMP-DGP hands to linked-GP prediction: one exact GP per non-root node.

Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation",
Sec. 3.2: after latent-MAP fitting, every node of the DAG is an exact GP conditioned on its training inputs
(design columns of its root parents and the MAP or observed values of its non-root parents) and its training
outputs (MAP values of a hidden node, observations of an observed node). :class:`FittedNode` holds one such GP;
:class:`~pyro_dag.infer.lamp.LatentMAP` produces them and :class:`~pyro_dag.infer.lamp.LinkedGPPredictor`
propagates Gaussian moments through them in topological order.
"""
from dataclasses import dataclass
from typing import Tuple

import torch

KERNELS = ("rbf", "matern52")


@dataclass(frozen=True)
class FittedNode:
    r"""One node's exact GP after latent-MAP fitting (Chang & Sung 2026, Sec. 3.2, Eq. (11)).

    The node's ``d_w`` outputs are independent GPs on the same ``[n, D]`` training inputs, output ``j`` with
    kernel ``variance[j] · k(x, x'; lengthscale[j])`` plus the nugget ``variance[j] · nugget[j]`` on the diagonal
    (the paper's ``τ² (K + g I)``), zero mean. Kernels, with ``u = (x - x') / lengthscale[j]`` elementwise:

    * ``"rbf"``: ``exp(-||u||² / 2)`` (the paper's ``exp(-||x - x'||²/θ)`` with ``θ = 2 ℓ²``);
    * ``"matern52"``: the *separable* Matérn-5/2, ``Π_d (1 + √5|u_d| + 5u_d²/3) exp(-√5|u_d|)`` (a product over
      input dimensions, as in Ming & Guillas 2021, so that linked-GP moments are closed form).

    :param str name: the node.
    :param tuple inputs: the node's input blocks, in column order of ``X``: names of root nodes (their design
        columns) and of non-root parents (their values); ``input_dims[k]`` columns each.
    :param tuple input_dims: the number of columns of each block.
    :param torch.Tensor X: ``[n, D]`` training inputs, ``D = sum(input_dims)``.
    :param torch.Tensor y: ``[n, d_w]`` training outputs.
    :param str kernel: ``"rbf"`` or ``"matern52"``.
    :param torch.Tensor lengthscale: ``[d_w, D]`` (an isotropic kernel repeats one value along ``D``).
    :param torch.Tensor variance: ``[d_w]`` process variances ``τ²`` (fixed to 1 for hidden nodes).
    :param torch.Tensor nugget: ``[d_w]`` nugget-to-variance ratios ``g`` (``σ_ε² = τ² g``).
    :param bool observed: whether ``y`` are observations (then a prediction of the observation adds the noise
        ``τ² g``) or MAP values of a hidden node.
    """

    name: str
    inputs: Tuple[str, ...]
    input_dims: Tuple[int, ...]
    X: torch.Tensor
    y: torch.Tensor
    kernel: str
    lengthscale: torch.Tensor
    variance: torch.Tensor
    nugget: torch.Tensor
    observed: bool = False

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"node {self.name!r}: kernel must be one of {KERNELS}, got {self.kernel!r}")
        n, D = self.X.shape
        if sum(self.input_dims) != D or len(self.inputs) != len(self.input_dims):
            raise ValueError(f"node {self.name!r}: inputs {self.inputs} with dims {self.input_dims} do not "
                             f"match X of shape {tuple(self.X.shape)}")
        if self.y.dim() != 2 or self.y.shape[0] != n:
            raise ValueError(f"node {self.name!r}: y must be [n={n}, d_w], got {tuple(self.y.shape)}")
        d_w = self.y.shape[1]
        if tuple(self.lengthscale.shape) != (d_w, D):
            raise ValueError(f"node {self.name!r}: lengthscale must be [{d_w}, {D}], got "
                             f"{tuple(self.lengthscale.shape)}")
        for label in ("variance", "nugget"):
            if tuple(getattr(self, label).shape) != (d_w,):
                raise ValueError(f"node {self.name!r}: {label} must be [{d_w}], got "
                                 f"{tuple(getattr(self, label).shape)}")

    @property
    def output_dim(self):
        """``d_w``."""
        return self.y.shape[1]

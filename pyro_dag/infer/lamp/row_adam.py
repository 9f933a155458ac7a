"""Row-wise Adam: Adam moments and step counters kept per row of a per-case parameter matrix.

Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation",
Algorithm 1, line 12: a mini-batch updates the rows of ``W`` in the batch *and their* Adam moments and counters;
the other rows, their moments and their counters stay untouched. A stock ``torch.optim.Adam`` over the whole
matrix would move the other rows by their momentum and decay their moments; ``torch.optim.SparseAdam`` bias-corrects
with one global step count. Here every row ``i`` has its own step count ``t_i``, so after each row has been in
``k`` batches it has had exactly the ``k`` Adam steps of a dense Adam fed with that row's gradients.
"""
import torch

__all__ = ["RowwiseAdam"]


class RowwiseAdam:
    r"""Adam on the rows of one ``[n, d]`` tensor, with per-row moments and per-row step counts (Eq. (9)).

    For the rows ``S`` of a step, with gradients ``h_S``::

        t_i ← t_i + 1,  m_i ← β₁ m_i + (1 - β₁) h_i,  v_i ← β₂ v_i + (1 - β₂) h_i²,
        w_i ← w_i - α (m_i / (1 - β₁^{t_i})) / (sqrt(v_i / (1 - β₂^{t_i})) + ε)

    :param torch.Tensor param: the ``[n, d]`` tensor, updated in place (no autograd).
    :param tuple betas: ``(β₁, β₂)``. :param float eps: ``ε``, outside the square root.
    """

    def __init__(self, param, *, betas=(0.9, 0.999), eps=1e-8):
        if param.dim() != 2:
            raise ValueError(f"RowwiseAdam takes an [n, d] tensor, got shape {tuple(param.shape)}")
        self.param = param
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.exp_avg = torch.zeros_like(param)
        self.exp_avg_sq = torch.zeros_like(param)
        self.steps = torch.zeros(param.shape[0], dtype=torch.long, device=param.device)

    @torch.no_grad()
    def step(self, rows, grad, lr):
        """One Adam step of ``param[rows]``.

        :param torch.Tensor rows: ``[m]`` distinct row indices. :param torch.Tensor grad: ``[m, d]`` their gradients.
        :param float lr: ``α``.
        """
        if grad.shape != (rows.shape[0], self.param.shape[1]):
            raise ValueError(f"RowwiseAdam.step: grad must be [{rows.shape[0]}, {self.param.shape[1]}], got "
                             f"{tuple(grad.shape)}")
        b1, b2 = self.betas
        t = self.steps[rows] + 1
        self.steps[rows] = t
        m = self.exp_avg[rows].mul_(b1).add_(grad, alpha=1 - b1)
        v = self.exp_avg_sq[rows].mul_(b2).addcmul_(grad, grad, value=1 - b2)
        self.exp_avg[rows] = m
        self.exp_avg_sq[rows] = v
        tf = t.to(self.param.dtype).unsqueeze(-1)
        m_hat = m / (1 - b1 ** tf)
        v_hat = v / (1 - b2 ** tf)
        self.param[rows] = self.param[rows] - lr * m_hat / (v_hat.sqrt() + self.eps)

    def state_dict(self):
        """Copies of the moments and counters."""
        return {"exp_avg": self.exp_avg.clone(), "exp_avg_sq": self.exp_avg_sq.clone(), "steps": self.steps.clone()}

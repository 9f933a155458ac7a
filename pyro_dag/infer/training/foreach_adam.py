"""Adam (Kingma & Ba 2015, "Adam: a method for stochastic optimization", ICLR, Algorithm 1) as
``torch.optim.Adam(..., foreach=True)`` computes it, without ``torch.optim``'s machinery.

:class:`~pyro_dag.infer.training.JointAdam` steps thousands of times over a dozen small tensors, where the
optimiser's own Python (step hooks, profiler records, per-parameter ``.item()`` of the step counts) is a visible
part of a step, and the first ``torch.optim`` optimiser of a process imports ``torch._dynamo`` (over a second on a
loaded 2-core machine, counted in the first training step). :class:`ForeachAdam` issues the same multi-tensor
kernels in the same order as torch's ``_multi_tensor_adam``, so the parameters and moments are bit for bit
torch's (``tests/infer/test_foreach_adam.py``), and reads and writes torch's ``state_dict`` format, so
checkpoints move between the two. Options beyond ``lr``, ``betas`` and ``eps`` (weight decay, AMSGrad, ...) are
torch's business: :func:`supports` says when this class applies.
"""
import torch

__all__ = ["ForeachAdam", "supports"]

#: ``torch.optim.Adam``'s defaults, as its ``state_dict`` lists them.
DEFAULTS = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0, "amsgrad": False, "maximize": False,
            "foreach": True, "capturable": False, "differentiable": False, "fused": None,
            "decoupled_weight_decay": False}
_FREE = ("lr", "betas", "eps")     # the options this class takes any (float) value of


def supports(args):
    """Whether ``args`` (``torch.optim.Adam`` keyword arguments of one parameter group) are ones :class:`ForeachAdam`
    computes: float ``lr``, ``betas``, ``eps``; every other option at the default (``foreach`` any)."""
    for key, value in args.items():
        if key in _FREE:
            values = value if key == "betas" else (value,)
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                return False
        elif key == "foreach":
            continue
        elif key not in DEFAULTS or value != DEFAULTS[key] or type(value) is not type(DEFAULTS[key]):
            return False
    return True


def _scalar_dtype():
    # torch.optim.optimizer._get_scalar_dtype: the dtype of the (non-capturable) step counts
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


class ForeachAdam:
    """``torch.optim.Adam(groups, foreach=True)`` for groups whose options :func:`supports`.

    :param list groups: ``[{"params": [tensors], "lr": ..., ...}]`` as for ``torch.optim.Adam``.
    :ivar list param_groups: the groups with every option filled in, as ``torch.optim.Adam``'s.
    """

    def __init__(self, groups):
        self.param_groups = []
        for g in groups:
            opts = {k: v for k, v in g.items() if k != "params"}
            if not supports(opts):
                raise ValueError(f"ForeachAdam: options {opts} need torch.optim.Adam")
            group = dict(DEFAULTS, **opts)
            group["foreach"] = True
            group["params"] = list(g["params"])
            self.param_groups.append(group)
        self._steps = {}     # id(param) -> number of updates (torch keeps it as a float tensor, "step")
        self._moments = {}   # id(param) -> (exp_avg, exp_avg_sq)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_()
                    p.grad.zero_()

    @torch.no_grad()
    def step(self):
        """One update of every parameter that has a gradient (those without are left alone, moments and step count
        included), as ``torch.optim.Adam.step`` with ``foreach=True``."""
        for group in self.param_groups:
            params, grads, avgs, sqs, counts = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")
                key = id(p)
                if key not in self._moments:
                    self._moments[key] = (torch.zeros_like(p, memory_format=torch.preserve_format),
                                          torch.zeros_like(p, memory_format=torch.preserve_format))
                    self._steps[key] = 0
                self._steps[key] += 1
                params.append(p)
                grads.append(p.grad)
                avg, sq = self._moments[key]
                avgs.append(avg)
                sqs.append(sq)
                counts.append(self._steps[key])
            if params:
                self._update(group, params, grads, avgs, sqs, counts)

    @staticmethod
    def _update(group, params, grads, avgs, sqs, counts):
        # torch.optim.adam._multi_tensor_adam (capturable=False, no weight decay, no AMSGrad), op for op
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        torch._foreach_lerp_(avgs, grads, 1 - beta1)
        torch._foreach_mul_(sqs, beta2)
        torch._foreach_addcmul_(sqs, grads, grads, 1 - beta2)
        # step counts are integers (exact in torch's float step tensor), so float(t) is what .item() gives
        step_size = [(lr / (1 - beta1 ** float(t))) * -1 for t in counts]
        correction2_sqrt = [(1 - beta2 ** float(t)) ** 0.5 for t in counts]
        denom = torch._foreach_sqrt(sqs)
        torch._foreach_div_(denom, correction2_sqrt)
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, avgs, denom, step_size)

    # ------------------------------------------------------------------ torch's state_dict format
    def state_dict(self):
        """``{"state": {index: {"step", "exp_avg", "exp_avg_sq"}}, "param_groups": [...]}``, as
        ``torch.optim.Adam.state_dict()`` (parameters numbered in group order)."""
        state, groups, index = {}, [], 0
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                key = id(p)
                if key in self._moments:
                    avg, sq = self._moments[key]
                    state[index] = {"step": torch.tensor(float(self._steps[key]), dtype=_scalar_dtype()),
                                    "exp_avg": avg, "exp_avg_sq": sq}
                ids.append(index)
                index += 1
            groups.append(dict({k: v for k, v in group.items() if k != "params"}, params=ids))
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a state of :meth:`state_dict` or of ``torch.optim.Adam`` (same groups and sizes; its options
        replace this optimiser's, as torch's ``load_state_dict`` does).

        :raises ValueError: if the groups differ in number or size, or an option needs ``torch.optim.Adam``.
        """
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups) or any(len(s["params"]) != len(g["params"])
                                                       for s, g in zip(saved, self.param_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        new_groups = []
        for s, g in zip(saved, self.param_groups):
            opts = {k: v for k, v in s.items() if k != "params"}
            if not supports(opts):
                raise ValueError(f"ForeachAdam: the saved options {opts} need torch.optim.Adam")
            new_groups.append(dict(DEFAULTS, **opts, params=g["params"]))
        self.param_groups = new_groups
        self._steps, self._moments = {}, {}
        for s, g in zip(saved, self.param_groups):
            for i, p in zip(s["params"], g["params"]):
                st = state_dict["state"].get(i)
                if not st:
                    continue
                self._steps[id(p)] = int(float(st["step"]))
                self._moments[id(p)] = tuple(st[k].to(dtype=p.dtype, device=p.device) if p.is_floating_point()
                                             else st[k].to(device=p.device) for k in ("exp_avg", "exp_avg_sq"))

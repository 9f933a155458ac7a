"""ForeachAdam is torch.optim.Adam(foreach=True) bit for bit, without torch.optim (issue 36: the collider recipe's
per-step overhead and the first optimiser's import of torch._dynamo)."""
import subprocess
import sys

import pytest
import torch

from pyro_dag.infer.training.foreach_adam import ForeachAdam, supports


def _params(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, dtype=torch.float64, generator=g).requires_grad_()
            for shape in [(3,), (4, 4), (2, 5), ()]]


def _groups(params):
    return [{"params": params[:2], "lr": 0.01}, {"params": params[2:], "lr": 0.003, "betas": (0.8, 0.99),
                                                  "eps": 1e-6}]


def _run(opt_cls, steps=25, hold_every=3):
    params = _params(0)
    opt = opt_cls(_groups(params))
    g = torch.Generator().manual_seed(1)
    for t in range(steps):
        for k, p in enumerate(params):
            # some parameters sit some steps out (JointAdam's held parameters): their state must not move
            p.grad = None if (t + k) % hold_every == 0 else torch.randn(p.shape, dtype=p.dtype, generator=g)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return params, opt


def _torch_adam(groups):
    return torch.optim.Adam(groups, foreach=True)


def test_foreach_adam_is_torch_adam_bit_for_bit():
    ours, opt = _run(ForeachAdam)
    ref, ref_opt = _run(_torch_adam)
    for a, b in zip(ours, ref):
        assert torch.equal(a, b)
    mine, theirs = opt.state_dict(), ref_opt.state_dict()
    assert mine["param_groups"] == theirs["param_groups"]
    assert mine["state"].keys() == theirs["state"].keys()
    for i in theirs["state"]:
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(mine["state"][i][key], theirs["state"][i][key]), (i, key)
            assert mine["state"][i][key].dtype == theirs["state"][i][key].dtype


@pytest.mark.parametrize("source", ["ours", "torch"])
def test_state_dict_moves_between_torch_and_foreach_adam(source):
    """A state saved by either optimiser and loaded into either continues bit for bit (checkpoints written before
    ForeachAdam hold torch's state)."""
    first = ForeachAdam if source == "ours" else _torch_adam
    params, opt = _run(first, steps=10)
    saved = {k: v for k, v in opt.state_dict().items()}
    finals = []
    for cls in (ForeachAdam, _torch_adam):
        ps = [p.detach().clone().requires_grad_() for p in params]
        o = cls(_groups(ps))
        o.load_state_dict(_clone(saved))
        g = torch.Generator().manual_seed(5)
        for _ in range(5):
            for p in ps:
                p.grad = torch.randn(p.shape, dtype=p.dtype, generator=g)
            o.step()
            o.zero_grad()
        finals.append(ps)
    for a, b in zip(*finals):
        assert torch.equal(a, b)


def _clone(sd):
    return {"state": {i: {k: v.clone() for k, v in s.items()} for i, s in sd["state"].items()},
            "param_groups": [dict(g) for g in sd["param_groups"]]}


def test_supports_only_what_it_computes():
    assert supports({"lr": 0.01}) and supports({"lr": 1, "betas": (0.9, 0.99), "eps": 1e-6, "foreach": True})
    assert not supports({"lr": 0.01, "weight_decay": 0.1})
    assert not supports({"lr": 0.01, "amsgrad": True})
    assert not supports({"lr": torch.tensor(0.01)})
    with pytest.raises(ValueError, match="torch.optim.Adam"):
        ForeachAdam([{"params": _params(0), "lr": 0.01, "maximize": True}])


def test_joint_adam_uses_torch_adam_for_other_options():
    import pyro
    import pyro.distributions as dist

    from pyro_dag.infer.training import JointAdam

    def model():
        pyro.sample("x", dist.Normal(pyro.param("m", torch.tensor(0.5)), 1.0), obs=torch.tensor(1.0))

    def guide():
        pass

    pyro.clear_param_store()
    plain = JointAdam(model, guide, pyro.infer.Trace_ELBO(), {"lr": 0.1})
    plain.step()
    assert isinstance(plain.optim, ForeachAdam)
    pyro.clear_param_store()
    decayed = JointAdam(model, guide, pyro.infer.Trace_ELBO(), {"lr": 0.1, "weight_decay": 0.5})
    decayed.step()
    assert isinstance(decayed.optim, torch.optim.Adam)


def test_training_imports_no_dynamo():
    """A JointAdam step does not import torch._dynamo (over a second of the first training step on a loaded machine;
    torch.optim's optimisers import it when they are built)."""
    code = ("import sys, torch, pyro, pyro.distributions as dist\n"
            "from pyro_dag.infer.training import JointAdam\n"
            "def model():\n"
            "    pyro.sample('x', dist.Normal(pyro.param('m', torch.tensor(0.5)), 1.0), obs=torch.tensor(1.0))\n"
            "a = JointAdam(model, lambda: None, pyro.infer.Trace_ELBO(), {'lr': 0.1})\n"
            "a.step(); a.step()\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"

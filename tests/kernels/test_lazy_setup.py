"""Fusion kernels set up lazily (at the first ``svi.step``) get the same, independent hyperparameters as with an
explicit ``model.setup(...)``: same parameter-store names and shapes, no tensor shared between two parameters,
and a gradient step moves each one on its own."""
import networkx as nx
import pyro
import pytest
import torch
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

from pyro_dag import DAGDGP, kernels as K
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import AutoStructuredGuide

# node c has parents x (root), a and b (latent); all of dimension 1 so that SumInput applies too
GRAPH = nx.DiGraph([("x", "a"), ("x", "b"), ("x", "c"), ("a", "c"), ("b", "c")])
RULES = {
    "Additive": lambda: K.Additive(),
    "Additive-Sum": lambda: K.Additive(K.RBF() + K.Linear()),
    "Product": lambda: K.Product(),
    "Concat": lambda: K.Concat(),
    "ANOVA": lambda: K.ANOVA(),
    "SubsetAdditive-ab-x": lambda: K.SubsetAdditive([("a", "b"), ("x",)]),
    "SubsetAdditive-x-ab": lambda: K.SubsetAdditive([("x",), ("a", "b")]),
    "InputConnected": lambda: K.InputConnected(),
    "SumInput": lambda: K.SumInput(),
    "MultiFidelity": lambda: K.MultiFidelity(),
    "NARGP": lambda: K.NARGP(),
}
INFERENCE = {
    "Trace_ELBO-AutoNormal": (AutoNormal, lambda: Trace_ELBO()),
    "DAGELBO-AutoStructuredGuide": (lambda m: AutoStructuredGuide(m, precision="mean_field"),
                                    lambda: DAGELBO(num_particles=2)),
}


def problem(n=10):
    g = torch.Generator().manual_seed(0)
    x = torch.linspace(-1, 1, n, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(3 * x) + 0.1 * torch.randn(n, 1, dtype=torch.float64, generator=g)
    # a is observed too, so that a and b are not exchangeable and their hyperparameters have no reason to agree
    return {"x": x}, {"c": y, "a": torch.cos(2 * x)}


def train(rule, inference, explicit, steps):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    inputs, data = problem()
    model = DAGDGP(GRAPH, kernels={"c": RULES[rule]()}, num_inducing=4).double()
    if explicit:
        model.setup(inputs, data)
    guide_cls, elbo = INFERENCE[inference]
    svi = SVI(model, guide_cls(model), pyro.optim.Adam({"lr": 0.05}), elbo())
    initial = None
    for i in range(steps):
        svi.step(inputs, data)
        if i == 0:  # after the first step every parameter exists (lazy set-up happens inside it)
            initial = {k: v.detach().clone() for k, v in pyro.get_param_store().named_parameters()}
    store = pyro.get_param_store()
    return model, dict(store.named_parameters()), initial


@pytest.mark.parametrize("inference", list(INFERENCE))
@pytest.mark.parametrize("rule", list(RULES))
def test_lazy_and_explicit_setup_give_the_same_independent_parameters(rule, inference):
    lazy, lazy_params, lazy_init = train(rule, inference, explicit=False, steps=4)
    explicit, explicit_params, _ = train(rule, inference, explicit=True, steps=4)
    kernel_names = sorted(k for k in explicit_params if k.startswith("kernels.c."))
    assert kernel_names, "the fusion kernel of node c has no hyperparameters in the param store"
    # same names and shapes, nothing left over from a template
    assert sorted(lazy_params) == sorted(explicit_params)
    assert not any("_template" in k for k in lazy_params)
    for k in explicit_params:
        assert lazy_params[k].shape == explicit_params[k].shape, k
    # the module's own tensors are the param store's, one tensor per name
    module_params = {f"kernels.c.{n}": p for n, p in lazy.kernels["c"].named_parameters()}
    for name, p in module_params.items():
        store_name = name[: -len("_unconstrained")] if name.endswith("_unconstrained") else name
        assert lazy_params[store_name] is p, store_name
    ptrs = [v.data_ptr() for v in lazy_params.values()]
    assert len(set(ptrs)) == len(ptrs), "two parameter-store entries share one tensor or its storage"
    # moving one hyperparameter moves no other
    before = {k: v.detach().clone() for k, v in lazy_params.items()}
    for k in kernel_names:
        with torch.no_grad():
            lazy_params[k].add_(0.5)
        changed = [j for j, v in lazy_params.items() if j != k and not torch.equal(v.detach(), before[j])]
        with torch.no_grad():
            lazy_params[k].copy_(before[k])
        assert not changed, f"changing {k} also changed {changed}"
    # the gradient reaches every kernel hyperparameter, and length-scales that started equal now differ
    for k in kernel_names:
        assert not torch.equal(lazy_params[k].detach(), lazy_init[k]), f"{k} did not move"
    scales = [k for k in kernel_names if k.endswith("lengthscale")]
    for i, k1 in enumerate(scales):
        for k2 in scales[i + 1:]:
            if lazy_init[k1].shape == lazy_init[k2].shape and torch.equal(lazy_init[k1], lazy_init[k2]):
                assert not torch.allclose(lazy_params[k1], lazy_params[k2], rtol=0, atol=1e-12), (k1, k2)


@pytest.mark.parametrize("rule", ["Additive", "Product", "ANOVA", "SubsetAdditive-ab-x", "SubsetAdditive-x-ab"])
def test_per_parent_lengthscales_differ_after_lazy_setup(rule):
    model, _, _ = train(rule, "Trace_ELBO-AutoNormal", explicit=False, steps=6)
    k = model.kernels["c"]
    parts = list(k.parent_kernels.values()) if hasattr(k, "parent_kernels") else list(k.subset_kernels)
    ls = [p.lengthscale_unconstrained for p in parts]
    for i in range(len(ls)):
        for j in range(i + 1, len(ls)):
            assert ls[i] is not ls[j]
            assert ls[i].shape != ls[j].shape or not torch.allclose(ls[i], ls[j], rtol=0, atol=1e-12)


def test_one_kernel_instance_for_two_parents_is_refused():
    shared = K.RBF()
    with pytest.raises(ValueError, match=r"\['b'\].*same instance"):
        K.Additive({"a": shared, "b": shared}).bind_parents([K.ParentSpec("a", 1, False),
                                                             K.ParentSpec("b", 1, False)], "w")

import copy

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.nn import PyroSample

from pyro_dag import kernels as K

SPECS = [K.ParentSpec("x", 2, True), K.ParentSpec("a", 1, False), K.ParentSpec("b", 1, False)]
D = sum(s.dim for s in SPECS)

BASE = {
    "RBF": lambda: K.RBF(),
    "RBF-ARD": lambda: K.RBF(ard=True),
    "Matern12": lambda: K.Matern12(ard=True),
    "Matern32": lambda: K.Matern32(),
    "Matern52": lambda: K.Matern52(ard=True),
    "RationalQuadratic": lambda: K.RationalQuadratic(ard=True, scale_mixture=0.7),
    "Linear": lambda: K.Linear(variance=0.5),
    "White": lambda: K.White(variance=0.3),
    "Constant": lambda: K.Constant(variance=0.7),
    "Sum": lambda: K.RBF() + K.Linear(),
    "Prod": lambda: K.Matern32() * K.Linear(),
}
FUSION = {
    "Concat": lambda: K.Concat(),
    "Additive": lambda: K.Additive(K.Matern52()),
    "Product": lambda: K.Product(),
    "ANOVA": lambda: K.ANOVA(),
    "SubsetAdditive": lambda: K.SubsetAdditive([("x", "a"), ("a", "b"), ("b",)]),
    "InputConnected": lambda: K.InputConnected(),
    "SumInput": lambda: K.SumInput(K.RBF(lengthscale=0.6)),
    "MultiFidelity": lambda: K.MultiFidelity(),
    "MultiFidelity-literal": lambda: K.MultiFidelity(form="literal"),
    "NARGP": lambda: K.NARGP(),
}
ALL = list(BASE) + list(FUSION)


def make(name):
    if name in BASE:
        return BASE[name]().double().bind(D)
    if name == "SumInput":  # needs parents of equal dimension
        k = FUSION[name]().double()
        return k.bind_parents([K.ParentSpec("a", 2, False), K.ParentSpec("b", 2, False)], "w")
    return FUSION[name]().double().bind_parents(SPECS, "w")


def perturb(k):
    """Move every hyperparameter off its default so that tests are not accidentally symmetric."""
    with torch.no_grad():
        for p in k.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return k


@pytest.mark.parametrize("name", ALL)
def test_gram_symmetric_psd(name):
    k = perturb(make(name))
    X = torch.randn(30, D, dtype=torch.float64)
    G = k(X)
    assert G.shape == (30, 30)
    assert torch.allclose(G, G.T, atol=1e-12)
    assert torch.linalg.eigvalsh(G).min() > -1e-9 * G.diagonal().abs().max()


@pytest.mark.parametrize("name", ALL)
def test_batched_equals_looped_and_cross(name):
    k = perturb(make(name))
    X = torch.randn(3, 4, 7, D, dtype=torch.float64)
    Z = torch.randn(5, D, dtype=torch.float64)
    batched = k(X, Z)
    assert batched.shape == (3, 4, 7, 5)
    for i in range(3):
        for j in range(4):
            assert torch.allclose(batched[i, j], k(X[i, j], Z), atol=1e-12)
    # the Gram matrix too, on inputs of size ~10 whose diagonal distances leave a rounding residue in the matmul
    # expansion (Matérn kernels take its square root: 1e-8 errors that differ between batched and single calls)
    Xg = 10 * X
    gram = k(Xg)
    for i in range(3):
        for j in range(4):
            assert torch.allclose(gram[i, j], k(Xg[i, j]), rtol=0, atol=1e-12)
            assert torch.allclose(gram[i, j].diagonal(), k(Xg[i, j], diag=True), rtol=0, atol=1e-12)
    # k(Z, X) is the transpose of k(X, Z)
    assert torch.allclose(k(Z, X), batched.transpose(-1, -2), atol=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_diag_equals_gram_diagonal(name):
    k = perturb(make(name))
    X = torch.randn(2, 9, D, dtype=torch.float64)
    assert torch.allclose(k(X, diag=True), k(X).diagonal(dim1=-2, dim2=-1), atol=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_gradients_reach_every_hyperparameter(name):
    k = perturb(make(name))
    X = torch.randn(6, D, dtype=torch.float64)
    Z = X[:4] + 0.3
    (k(X).sum() + k(X, Z).pow(2).sum() + k(X, diag=True).sum()).backward()
    params = dict(k.named_parameters())
    assert params, "kernel has no hyperparameters"
    for pname, p in params.items():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
        assert p.grad.abs().sum() > 0, f"no gradient reaches {pname}"


@pytest.mark.parametrize("name", ALL)
def test_gradcheck_inputs(name):
    k = perturb(make(name))
    X = torch.randn(4, D, dtype=torch.float64, requires_grad=True)
    Z = torch.randn(3, D, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: k(x, Z), (X,))


def test_ard_lengthscales_created_at_bind():
    k = K.RBF(ard=True).bind(3)
    assert k.lengthscale.shape == (3,)
    with pytest.raises(ValueError, match="length-scales"):
        K.RBF(lengthscale=torch.ones(2)).bind(3)


def test_product_of_rbf_equals_rbf_on_concatenation():
    specs = [K.ParentSpec("a", 1, False), K.ParentSpec("b", 2, False)]
    prod = K.Product(K.RBF(lengthscale=0.7)).double().bind_parents(specs, "w")
    concat = K.Concat(K.RBF(lengthscale=0.7)).double().bind_parents(specs, "w")
    X = torch.randn(8, 3, dtype=torch.float64)
    assert torch.allclose(prod(X), concat(X), atol=1e-12)


def test_sum_input_depends_only_on_the_sum():
    k = make("SumInput")
    X = torch.randn(5, 4, dtype=torch.float64)
    shift = torch.randn(5, 2, dtype=torch.float64)
    Y = torch.cat([X[:, :2] + shift, X[:, 2:] - shift], -1)
    assert torch.allclose(k(X), k(Y), atol=1e-12)


def test_multifidelity_cutajar_formula():
    k = make("MultiFidelity")
    X = torch.randn(6, D, dtype=torch.float64)
    x, z = X[:, :2], X[:, 2:]
    expected = k.rho(x) * (k.linear(z) + k.se(z)) + k.delta(x)
    assert torch.allclose(k(X), expected)


def test_ar1_is_a_linear_coupling_plus_a_discrepancy():
    """AR1 (Kennedy & O'Hagan 2000): rho^2 z z' + k_delta(x); positive semi-definite; its diagonal matches."""
    k = K.AR1().double().bind_parents(SPECS, "w")
    X = torch.randn(7, D, dtype=torch.float64)
    x, z = X[:, :2], X[:, 2:]
    with torch.no_grad():
        expected = k.linear.variance * (z @ z.T) + k.delta(x)
        assert torch.allclose(k(X), expected)
        assert torch.allclose(k(X, diag=True), expected.diagonal())
        assert float(torch.linalg.eigvalsh(k(X)).min()) > -1e-10
    with pytest.raises(ValueError, match="'w'"):
        K.AR1().bind_parents([K.ParentSpec("a", 1, False)], "w")


def test_fusion_errors_name_the_node():
    with pytest.raises(ValueError, match="'w'.*root parent"):
        K.InputConnected().bind_parents([K.ParentSpec("a", 1, False)], "w")
    with pytest.raises(ValueError, match="'w'.*equal dimension"):
        K.SumInput().bind_parents([K.ParentSpec("a", 1, False), K.ParentSpec("b", 2, False)], "w")
    with pytest.raises(ValueError, match="'w'"):
        K.MultiFidelity().bind_parents([K.ParentSpec("a", 1, False)], "w")
    with pytest.raises(ValueError, match="missing"):
        K.Additive({"a": K.RBF()}).bind_parents(SPECS, "w")
    with pytest.raises(ValueError, match="not parents"):
        K.SubsetAdditive([("zz",)]).bind_parents(SPECS, "w")


def test_hyperparameter_prior_with_pyrosample():
    k = K.RBF().double().bind(2)
    k.lengthscale = PyroSample(dist.LogNormal(torch.tensor(0.0, dtype=torch.float64), 1.0))
    X = torch.randn(4, 2, dtype=torch.float64)
    tr = pyro.poutine.trace(lambda: k(X)).get_trace()
    assert "lengthscale" in tr.nodes and tr.nodes["lengthscale"]["type"] == "sample"


def test_kernels_are_independent_copies_per_parent():
    k = K.Additive(K.RBF()).double().bind_parents(SPECS, "w")
    a, b = k.parent_kernels["a"], k.parent_kernels["b"]
    assert a.lengthscale_unconstrained is not b.lengthscale_unconstrained
    assert copy.deepcopy(k)(torch.zeros(2, D, dtype=torch.float64)).shape == (2, 2)


@pytest.mark.parametrize("name", ALL)
def test_gram_agrees_across_devices(name, device):
    k = perturb(make(name))
    X = torch.randn(9, D, dtype=torch.float64)
    gram, diag = k(X).detach(), k(X, diag=True).detach()
    # PyroModule parameters live in the global param store under their names: the copy must not find the
    # CPU originals there
    pyro.clear_param_store()
    k_d = copy.deepcopy(k).to(device)
    assert torch.allclose(k_d(X.to(device)).cpu(), gram, atol=1e-12)
    assert torch.allclose(k_d(X.to(device), diag=True).cpu(), diag, atol=1e-12)

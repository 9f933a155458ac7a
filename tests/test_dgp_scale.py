"""pyro_dag.dgp.scale: inputs and data far from unit scale, met by kernels that start at unit hyperparameters, are
named with "rescale" at set-up, and the noise warnings name the scale as the likely cause (issue 42)."""
import warnings

import networkx as nx
import pytest
import torch

from pyro_dag import DAGDGP, kernels
from pyro_dag.dgp.scale import ScaleWarning, scale_hint

GRAPH = nx.DiGraph([("root_a", "node_b"), ("node_b", "leaf_c")])


def _data(scale_inputs=1.0, scale_data=1.0, n=30):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 1, generator=g, dtype=torch.float64)
    b = torch.sin(2 * x) + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    c = b ** 2 + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return {"root_a": x * scale_inputs}, {"node_b": b * scale_data, "leaf_c": c * scale_data}


def _setup(inputs, data, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DAGDGP(GRAPH, **kw).double().setup(inputs, data)
    return [str(w.message) for w in caught if issubclass(w.category, ScaleWarning)]


@pytest.mark.parametrize("factor", [1e-8, 1e8])
def test_far_inputs_met_by_unit_kernels_are_named(factor):
    user = {"kernels": {"node_b": kernels.RBF(), "leaf_c": kernels.RBF()}}
    got = _setup(*_data(scale_inputs=factor), **user)
    assert len(got) == 1 and "input 'root_a' has scale" in got[0] and "rescale 'root_a'" in got[0]
    got = _setup(*_data(scale_data=factor), **user)
    assert {m.split(" have scale")[0] for m in got} == {"the data of node 'node_b'", "the data of node 'leaf_c'"}
    assert all("rescale" in m for m in got)


def test_default_kernels_start_at_the_data_scale_and_stay_silent():
    assert _setup(*_data(scale_inputs=1e-8, scale_data=1e8)) == []       # pilot-started kernels follow the scale
    assert _setup(*_data(), kernels={"node_b": kernels.RBF()}) == []      # unit scale: nothing to say


def test_the_noise_warnings_name_the_scale():
    model = DAGDGP(GRAPH).double()
    inputs, data = _data(scale_inputs=1e-8)
    assert "its parent 'root_a' has standard deviation" in scale_hint(model, "node_b", inputs, data)
    assert "rescale 'root_a'" in scale_hint(model, "node_b", inputs, data)
    assert scale_hint(model, "node_b", *_data()) == ""
    inputs, data = _data(scale_data=1e8)
    assert "its data have standard deviation" in scale_hint(model, "leaf_c", inputs, data)


def test_data_at_1e_minus_8_with_unit_kernels_is_named_not_fitted_silently():
    """Issue 42: data at 1e-8 with unit-started kernels broke the exact fit's Cholesky with a raw torch error. Since
    the exact fits of a float64 model start in float64 whatever torch's default dtype, the fit goes through: it must
    then say that the scale is the problem (naming the node and the fix) and that its noise explains the data."""
    import warnings

    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide
    from pyro_dag.infer.training.guard import NoiseExplainsDataWarning

    inputs, data = _data(scale_data=1e-8)
    model = DAGDGP(GRAPH, kernels={"node_b": kernels.RBF(), "leaf_c": kernels.RBF()}).double()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(model, AutoStructuredGuide(model), inputs, data, num_steps=2, progress=False)
    scale = [str(w.message) for w in caught if w.category is ScaleWarning]
    assert any("rescale 'node_b'" in m for m in scale), scale
    assert any(w.category is NoiseExplainsDataWarning for w in caught)

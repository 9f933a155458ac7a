"""predict refuses a model or guide holding a NaN or infinite parameter (earlier: NaN predictions, no word)."""
import networkx as nx
import pyro
import pytest
import torch
from pyro.infer.autoguide import AutoNormal

from pyro_dag import DAGDGP
from pyro_dag.infer import NonFiniteLossError, train
from pyro_dag.infer.autoguide import AutoStructuredGuide


@pytest.mark.parametrize("guide_kind", ["structured", "autonormal"])
@pytest.mark.parametrize("where", ["guide", "model"])
def test_a_nan_parameter_is_named_before_predicting(guide_kind, where):
    pyro.clear_param_store()
    X = torch.linspace(0, 1, 12, dtype=torch.float64)[:, None]
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=4).double()
    guide = AutoStructuredGuide(model) if guide_kind == "structured" else AutoNormal(model)
    train(model, guide, {"x": X}, {"y": torch.sin(3 * X)}, num_steps=2, progress=False, recipe="adam")
    assert torch.isfinite(model.predict(guide, {"x": X}, num_samples=3)["y"].mean).all()
    module = guide if where == "guide" else model
    name, param = next((n, p) for n, p in module.named_parameters() if "loc" in n or "lengthscale" in n)
    with torch.no_grad():
        param.view(-1)[0] = float("nan")
    with pytest.raises(NonFiniteLossError, match=f"the {where}'s parameter '{name}' has 1 NaN or infinite entry"):
        model.predict(guide, {"x": X}, num_samples=3)


def test_predict_before_training_raises_not_fitted():
    """Earlier a RuntimeError (not one of the library's error types)."""
    from pyro_dag.errors import NotFittedError

    pyro.clear_param_store()
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=4).double()
    with pytest.raises(NotFittedError, match=r"not set up yet.*train\(model, guide, inputs, data"):
        model.predict(AutoStructuredGuide(model), {"x": torch.zeros(3, 1, dtype=torch.float64)}, num_samples=2)

import networkx as nx
import pyro
import torch
from pyro.infer import SVI

from pyro_dag import DAGDGP, kernels
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import AutoStructuredGuide

torch.manual_seed(0)
g = nx.DiGraph([("x", "h"), ("h", "y"), ("x", "y"), ("h", "c")])  # h is never observed
n = 400
x = torch.linspace(-2, 2, n).unsqueeze(-1)
h = torch.sin(2 * x)
y = h + 0.5 * x + 0.1 * torch.randn(n, 1)
y[::5] = float("nan")                                                # missing entries
c = torch.bernoulli(torch.sigmoid(4 * h))                            # a binary node

model = DAGDGP(
    g,
    kernels={"h": kernels.Matern52(), "y": kernels.Additive(kernels.RBF()), "c": kernels.RBF()},
    likelihoods={"y": "gaussian", "c": "bernoulli"},
    num_inducing=20,
)
guide = AutoStructuredGuide(model, precision="mean_field")
svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), DAGELBO(num_particles=2))
for step in range(100):
    svi.step({"x": x}, {"y": y, "c": c}, subsample_size=100)        # minibatches, likelihood scaled by n/100
pred = model.predict(guide, {"x": x}, num_samples=50)
print(pred["h"].samples.shape, pred["h"].mean.shape)                 # [50, n, 1] and [n, 1]

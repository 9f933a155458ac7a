import pyro

from pyro_dag import DAGDGP, kernels
from pyro_dag.datasets import collider
from pyro_dag.gp import Gaussian
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.utils import freeze

seed = 0  # seed of the optimisation and the predictions
pyro.set_rng_seed(seed)
# The paper's latent collider x1 -> w1 -> w3 <- w2 <- x2: w3 is observed at 119 of its 165 cases.
ds = collider(seed=0)

# One sparse GP per non-root node; the child's kernel acts on the sum of its parents. As in the paper,
# the kernels and the noise are the true ones and stay fixed: only the posterior is learned.
model = DAGDGP(
    ds.graph,
    kernels={"w1": kernels.RBF(lengthscale=0.4), "w2": kernels.RBF(lengthscale=0.4),
             "w3": kernels.SumInput(kernels.RBF(lengthscale=0.6))},
    likelihoods={"w3": Gaussian(variance=0.015**2)},
    num_inducing={"w1": 15, "w2": 15, "w3": 49},
    learn_inducing=False,
).double()
freeze(model.kernels)
freeze(model.likelihoods)

# DAG-SVI: a Gaussian over all inducing outputs with a precision on the chordal graph; its initial scales
# come from the data.
guide = AutoStructuredGuide(model, precision="chordal")
# The recommended recipe: 1000 Adam steps, then natural-gradient steps on the whole Gaussian posterior
# (DAGELBO with 4 samples in antithetic pairs); plain Pyro SVI underneath.
result = train(model, guide, ds.inputs, ds.data, num_steps=3000, progress=False)

pred = model.predict(guide, ds.inputs, num_samples=500)  # every node, observed or not
err = pred["w3"].mean - ds.truth["w3"]  # against the noise-free child
print(f"child RMSE: observed cases {err[ds.train_mask].pow(2).mean().sqrt():.4f}, "
      f"held out {err[~ds.train_mask].pow(2).mean().sqrt():.4f}")
var1, var2 = pred["w1"].variance.mean(), pred["w2"].variance.mean()
print(f"parents' posterior variance {var1:.3f} (w1), {var2:.3f} (w2)")
print(f"final ELBO {-result.losses[-1]:.1f}")

from pyro_dag.infer import GaussianNaturalGradient, SinkNaturalGradient

ng = GaussianNaturalGradient(model, guide, elbo, step_size=0.01)
for step in range(20):
    ng.step({"x": x}, {"y": y, "c": c})

sink = SinkNaturalGradient(model, guide, step_size=0.5)             # y only: c is Bernoulli, left to Adam
svi = SVI(model, guide, pyro.optim.Adam(sink.optim_args({"lr": 0.01})), elbo)
for step in range(20):
    svi.step({"x": x}, {"y": y, "c": c})
    sink.step({"x": x}, {"y": y, "c": c})

# a second guide of the model gets its own name: the first one's parameters stay in Pyro's parameter store
guide = AutoStructuredGuide(model, precision="chordal", backend="sparse", init_scale={"y": 0.1}, name="chordal")
elbo = DAGELBO(num_particles=4, sampler="joint", antithetic=True)
svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), elbo)
for step in range(20):
    svi.step({"x": x}, {"y": y, "c": c})
print(guide.median()["h.u"].shape)                                  # [1, 20]: the site's own shape

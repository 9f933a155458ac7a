from pyro_dag.infer import train

torch.manual_seed(1)
g_conf = nx.DiGraph([("h", "a"), ("h", "b"), ("x", "b")])           # h: a hidden confounder of a and b
m = 150
hidden = torch.randn(m, 1)
xb = torch.rand(m, 1) * 4 - 2
a = torch.tanh(2 * hidden) + 0.05 * torch.randn(m, 1)
b = hidden + torch.sin(xb) + 0.05 * torch.randn(m, 1)
confounded = DAGDGP(g_conf, latent_inputs={"h": 1}, num_inducing=12)  # h_i ~ N(0, I), one per case
conf_guide = AutoStructuredGuide(confounded, name="confounded")      # per-case Gaussians for h
train(confounded, conf_guide, {"x": xb}, {"a": a, "b": b}, num_steps=300, lr=0.03, progress=False)
h_mean = conf_guide.median()["h.x"]                                  # [m, 1] posterior means of the cases
print(h_mean.shape)
# new cases: their latent is inferred from what is observed for them (here a), with the globals fixed
new = confounded.predict(conf_guide, {"x": xb[:5]}, {"a": a[:5]}, num_samples=100)
print(new["b"].mean.shape)

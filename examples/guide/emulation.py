import numpy as np
from pyro_dag.datasets.multifidelity import forrester
from pyro_dag.emulation import MultiFidelityEmulator

f = forrester()                                        # two levels on [0, 1]; f(X, level=0) is the cheap one
X_low = np.random.default_rng(0).random((50, 1))
X_high = X_low[:14]                                    # nested designs (any designs work)
em = MultiFidelityEmulator({"low": (X_low, f(X_low, level=0)), "high": (X_high, f(X_high))},
                           parents={"high": ["low"]}, bounds=f.bounds)
em.fit()                                               # exact fits; kernel and noise chosen from the data
print(em.selection.chosen["high"] in ("multifidelity", "ar1", "nargp"))
pred = em.predict(np.linspace(0, 1, 5)[:, None])       # every fidelity, in its own units
print(sorted(pred), pred["high"].mean.shape, pred["high"].std.shape)

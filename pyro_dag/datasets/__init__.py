"""Built-in data sets (data only; models live with the experiments that use them).

* :func:`collider` -- the latent collider of the DAG-DGP paper (Perlino et al. 2026, arXiv:2607.09645, App. G.3);
* :func:`sachs` -- the Sachs et al. (2005) protein-signalling data; :func:`sachs_experiments` -- the same with
  its nine conditions and their published intervention targets;
* synthetic SEMs on Erdős-Rényi and scale-free DAGs for structure learning;
* :data:`TEST_FUNCTIONS` -- the ten simulators of the LaMP-DGP benchmarks (Chang & Sung 2026, App. D);
* :func:`random_latent` -- random latent-DAG problems from a seed (hidden nodes, GP-drawn or composed mechanisms),
  for judging defaults on problems nobody tuned them to.
"""
from .collider import ColliderData, collider

__all__ = ["ColliderData", "collider"]
from .sachs import (SACHS_COLUMNS, SACHS_CONDITIONS, SACHS_NODES, SachsData, SachsExperiments, sachs,  # noqa: E402
                    sachs_experiments, sachs_graph)
from .synthetic import SEMData, erdos_renyi_dag, sample_sem, scale_free_dag, synthetic_sem, two_node  # noqa: E402

__all__ += ["SachsData", "SachsExperiments", "sachs", "sachs_experiments", "sachs_graph", "SACHS_CONDITIONS",
            "SACHS_NODES", "SACHS_COLUMNS",
            "SEMData", "erdos_renyi_dag", "scale_free_dag", "synthetic_sem", "sample_sem", "two_node"]
from .test_functions import TEST_FUNCTIONS, TestFunction, add_noise, get_test_function, latin_hypercube  # noqa: E402

__all__ += ["TestFunction", "TEST_FUNCTIONS", "get_test_function", "latin_hypercube", "add_noise"]
from .random_latent import LatentProblem, random_latent  # noqa: E402

__all__ += ["LatentProblem", "random_latent"]

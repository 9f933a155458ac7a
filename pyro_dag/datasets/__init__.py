"""Built-in data sets: the latent collider (digest-000 §4.1) and structure-learning data (digest-001)."""
from .collider import ColliderData, collider

__all__ = ["ColliderData", "collider"]
from .sachs import SACHS_COLUMNS, SACHS_NODES, SachsData, sachs, sachs_graph  # noqa: E402
from .synthetic import SEMData, erdos_renyi_dag, sample_sem, scale_free_dag, synthetic_sem, two_node  # noqa: E402

__all__ += ["SachsData", "sachs", "sachs_graph", "SACHS_NODES", "SACHS_COLUMNS",
            "SEMData", "erdos_renyi_dag", "scale_free_dag", "synthetic_sem", "sample_sem", "two_node"]

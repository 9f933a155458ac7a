"""The structural-equation mechanisms in one namespace; each lives in :mod:`pyro_dag.structure.mechanisms`."""
from .mechanisms import BGeSEM, LinearGaussianSEM, Mechanism, MLPSEM, NodeHyperNet  # noqa: F401

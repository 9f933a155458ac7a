"""Built-in data sets: the latent collider (digest-000 §4.1) and structure-learning data (digest-001)."""
from .collider import ColliderData, collider

__all__ = ["ColliderData", "collider"]

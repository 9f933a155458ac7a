"""Ordinary least squares with an intercept and its Gaussian predictive: the simplest baseline of a regression
(the predictive variance ``σ̂² (1 + x̃ᵀ (X̃ᵀ X̃)⁻¹ x̃)`` of the classical linear model, e.g. Rasmussen & Williams
2006, *Gaussian Processes for Machine Learning*, Sec. 2.1, with a flat prior)."""
import torch

__all__ = ["LinearRegression", "training_data"]


def training_data(X, y, where):
    """``X [n, D]`` and ``y [n]`` as float64 tensors, checked: the same number of rows, at least 2, all finite.

    :param str where: the caller, for the messages (e.g. ``"ExactGP.fit"``).
    """
    X = torch.as_tensor(X, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
    if X.dim() == 1:
        X = X.unsqueeze(-1)
    if X.shape[0] != y.shape[0] or X.shape[0] < 2:
        raise ValueError(f"{where}: X has {X.shape[0]} rows and y {y.shape[0]}; give at least 2 cases")
    if not (torch.isfinite(X).all() and torch.isfinite(y).all()):
        raise ValueError(f"{where}: X and y must be finite (drop the rows with missing values)")
    return X, y


class LinearRegression:
    """``y = β₀ + xᵀ β + ε``, ``ε ~ N(0, σ²)``, by least squares (a tiny ridge keeps rank-deficient designs solvable).

    Example::

        lin = LinearRegression().fit(X_train, y_train)
        mean, var = lin.predict(X_test, include_noise=True)
    """

    def fit(self, X, y):
        """Fit to ``X [n, D]``, ``y [n]`` (or ``[n, 1]``); returns ``self``."""
        X, y = training_data(X, y, "LinearRegression.fit")
        Xt = torch.cat([torch.ones_like(X[:, :1]), X], -1)
        gram = Xt.T @ Xt
        gram = gram + 1e-10 * gram.diagonal().mean() * torch.eye(gram.shape[0], dtype=gram.dtype)
        self._gram_inv = torch.linalg.inv(gram)
        self.coef = self._gram_inv @ (Xt.T @ y)
        resid = y - Xt @ self.coef
        dof = max(1, X.shape[0] - Xt.shape[1])
        self.noise_variance = float(resid.pow(2).sum() / dof)
        return self

    @torch.no_grad()
    def predict(self, X, include_noise=False):
        """``(mean [m], var [m])`` at ``X [m, D]``: of the regression line, or of a new observation."""
        X = torch.as_tensor(X, dtype=torch.float64)
        if X.dim() == 1:
            X = X.unsqueeze(-1)
        Xt = torch.cat([torch.ones_like(X[:, :1]), X], -1)
        lev = ((Xt @ self._gram_inv) * Xt).sum(-1)
        var = self.noise_variance * lev + (self.noise_variance if include_noise else 0.0)
        return Xt @ self.coef, var.clamp_min(1e-12)

"""A tiny shop, the example project of the applyonce demo."""

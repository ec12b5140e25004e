"""Optimisation and the training loop."""

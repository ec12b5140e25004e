"""Evaluation with the paper's protocol (pop-100), uniform-100 and full ranking."""

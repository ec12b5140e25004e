"""The scale check's synthetic MovieLens file: the asked size, >= 20 distinct movies per user."""

import pandas as pd

from bert4rec_tf.scripts import scale_check


def test_synthetic_ratings_have_the_asked_size_and_distinct_movies(tmp_path):
    path = str(tmp_path / "ratings.csv")
    rows = scale_check.write_ratings(path, users=300, items=500, interactions=30_000, seed=3)
    frame = pd.read_csv(path)
    assert rows == len(frame) == 30_000 and list(frame.columns) == ["userId", "movieId", "rating", "timestamp"]
    per_user = frame.groupby("userId")["movieId"]
    assert per_user.size().min() >= 20 and per_user.size().max() <= 500 // 3
    assert (per_user.nunique() == per_user.size()).all()
    assert frame["movieId"].between(1, 500).all() and frame["userId"].nunique() == 300
    assert (frame.groupby("userId")["timestamp"].diff().dropna() >= 0).all()

"""The papers' experiments on top of the package: the plans of training runs and the flags they derive
(`plans`), the papers' published numbers (`published`), the records of finished runs (`records`), the
report beside the published numbers (`report`) and its figures (`figures`), the `bert4rec-reproduce`
command (`reproduce`) and its job scheduler (`scheduler`), the cores' speed measured before each run
(`calibration`) and `bert4rec-compare-runs` (`compare_runs`).

Only the command-line tools in `bert4rec_tf.scripts` import this package: data, models, training,
evaluation and export never do (tests/test_import_graph.py keeps it so).
"""

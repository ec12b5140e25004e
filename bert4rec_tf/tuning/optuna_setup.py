"""Optuna as the tuner uses it: its experimental-feature warnings silenced (the heartbeat and retry
features are what makes a study survive a kill; the tests pin their behaviour) and its log lines kept
to their message."""

from __future__ import annotations

import logging

from bert4rec_tf import cli


def load_optuna():
    """Optuna, with its experimental-feature warnings silenced and its log lines one line each."""
    import warnings

    import optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    for handler in logging.getLogger("optuna").handlers:
        if not any(isinstance(item, _OneLine) for item in handler.filters):
            handler.addFilter(_OneLine())
    return optuna


class _OneLine(logging.Filter):
    """Keeps Optuna's log lines to their message: a failed trial's cause is one line (its error, also
    in the trial's `error` attribute), not a traceback, without the line of its value (None), and
    a trial stopped by Ctrl-C is not reported (the command says it once); `--debug` shows all."""

    def filter(self, record: logging.LogRecord) -> bool:
        if cli.debugging():
            return True
        interrupted = bool(record.exc_info) and isinstance(record.exc_info[1], KeyboardInterrupt)
        record.exc_info, record.exc_text = None, None
        return not interrupted and not record.getMessage().endswith("failed with value None.")

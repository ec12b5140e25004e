"""Model families as Tasks (see `bert4rec_tf.tasks.base`), registered by name.

Adding a family inside the package: one module with its configuration sections and its `Task`
subclass (model, training stream, features, presets) and one `register_task` line below. From
outside the package: an installed distribution declares its Task in the entry-point group
`bert4rec_tf.tasks` (`load_plugins`); docs/architecture.md walks through an example.
"""

from bert4rec_tf.tasks.base import Task
from bert4rec_tf.tasks.bert4rec import BERT4RecTask
from bert4rec_tf.tasks.bert4rec_match import BERT4RecMatchTask
from bert4rec_tf.tasks.bpr_mf import BPRMFTask
from bert4rec_tf.tasks.caser import CaserTask
from bert4rec_tf.tasks.fpmc import FPMCTask
from bert4rec_tf.tasks.gru4rec import GRU4RecPlusTask, GRU4RecTask
from bert4rec_tf.tasks.ncf import NCFTask
from bert4rec_tf.tasks.pop import PopTask
from bert4rec_tf.tasks.sasrec import SASRecTask
from bert4rec_tf.tasks.registry import (
                                        REFERENCE_TASK,
                                        TASKS,
                                        get_task,
                                        load_plugins,
                                        preset,
                                        preset_names,
                                        recipe_overrides,
                                        reference_model,
                                        refuse_inactive_settings,
                                        register_task,
                                        task_of_preset,
                                        validate,
)

register_task(BERT4RecTask())
register_task(SASRecTask())
register_task(BERT4RecMatchTask())
register_task(PopTask())
register_task(CaserTask())
register_task(GRU4RecTask())
register_task(GRU4RecPlusTask())
register_task(BPRMFTask())
register_task(NCFTask())
register_task(FPMCTask())
load_plugins()

__all__ = ["REFERENCE_TASK", "TASKS", "Task", "get_task", "load_plugins", "preset", "preset_names",
           "recipe_overrides", "reference_model", "refuse_inactive_settings", "register_task", "task_of_preset",
           "validate"]

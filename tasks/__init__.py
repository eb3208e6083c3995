"""Tasks: a registry, the ICL tasks, the decoder and encoder language-model tasks, and probes."""
from .base import Metric, RunContext, Task, TaskResult, TrainingFailure
from .registry import TaskError, create_task, get_task_class, list_tasks, register_task

__all__ = ["Metric", "RunContext", "Task", "TaskError", "TaskResult", "TrainingFailure",
           "create_task", "get_task_class", "list_tasks", "register_task"]
from . import encoder_mlm  # noqa: E402,F401  (registers the encoder task)
from . import decoder_lm  # noqa: E402,F401  (registers the decoder task)
from . import icl_quantifiers, icl_linear, icl_mqar, saturation_probe  # noqa: E402,F401  (register the ICL tasks and the probe)
from . import cost  # noqa: E402,F401  (registers the cost track's bench_scorers and bench_train)

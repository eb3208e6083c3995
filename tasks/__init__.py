"""Tasks: a registry, the ICL tasks, the decoder and encoder language-model tasks, and probes."""
from .base import Metric, RunContext, Task, TaskResult, TrainingFailure
from .registry import TaskError, create_task, get_task_class, list_tasks, register_task

__all__ = ["Metric", "RunContext", "Task", "TaskError", "TaskResult", "TrainingFailure",
           "create_task", "get_task_class", "list_tasks", "register_task"]

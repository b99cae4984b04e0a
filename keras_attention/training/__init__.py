"""Crash-safe training of any Keras model: a run folder that survives being killed.

`TrainingRun` trains a model into a run folder whose files are written whole
or not at all, locked against a second trainer, refused when the folder is not
a run of this package, compared with the options on resume, resumed after a
kill at any instant, decayed over a time budget and marked finished last
(docs/training_runs.md). The translator (`keras_attention.translation`) and
the G2P example train through it.

Modules: `training_run` (`TrainingRun`), `run_folder` (the files and states
of a run folder), `run_lock` (`RunLock`), `schedules` (`CosineToBudget`;
`TrainingTime` and `check_max_minutes`: the one time budget, `max_minutes`,
the training time of the whole run across its resumes), `time_budget`
(`TimeBudget`: the rate decayed step by step over a budget),
`averaging` (checkpoint averaging), `threads` (`set_intra_op_threads`),
`length_batches` (teacher-forced batches of similar lengths, reshuffled
every epoch), `atomic` (atomic writes; standard library only).
"""

import importlib

# Each public name and its module, imported on first use: the atomic writes
# (standard library only) do not import Keras.
_WHERE = {
    "average_weights": "averaging",
    "CorruptRunError": "run_folder",
    "DivergedRunError": "run_folder",
    "NotARunError": "run_folder",
    "RunExistsError": "run_folder",
    "RunFolderError": "run_folder",
    "RunInUseError": "run_folder",
    "RunKeeper": "run_folder",
    "RunOptionsError": "run_folder",
    "RunStatus": "run_folder",
    "run_status": "run_folder",
    "RunLock": "run_lock",
    "CosineToBudget": "schedules",
    "cosine_to_budget": "schedules",
    "check_max_minutes": "schedules",
    "TrainingTime": "schedules",
    "TimeBudget": "time_budget",
    "RunWriteError": "training_run",
    "TrainingRun": "training_run",
    "UntrainedRunError": "training_run",
    "add_run_arguments": "training_run",
    "add_training_arguments": "training_run",
    "set_intra_op_threads": "threads",
    "length_bucketed_batches": "length_batches",
    "length_bucketed_dataset": "length_batches",
}
__all__ = sorted(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_WHERE[name]}")
    return getattr(module, name)


def __dir__():
    return sorted(set(globals()) | set(_WHERE))

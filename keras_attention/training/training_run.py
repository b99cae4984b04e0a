"""`TrainingRun`: train any Keras model into a run folder that survives being killed."""

import contextlib
import errno
import sys
import time
import warnings
from pathlib import Path

import keras

from keras_attention.arguments import cli_types
from keras_attention.backend import precision
from keras_attention.files.atomic import write_json
from keras_attention.files.model_file import load_model
from keras_attention.training import averaging
from keras_attention.training import distribution as distribution_lib
from keras_attention.training import run_folder
from keras_attention.training.run_folder import CONFIG_FILE
from keras_attention.training.run_folder import FINISHED
from keras_attention.training.run_folder import FINISHED_FILE
from keras_attention.training.run_folder import MODEL_FILE
from keras_attention.training.run_folder import UNFINISHED
from keras_attention.training.run_folder import CorruptRunError
from keras_attention.training.run_folder import DivergedRunError
from keras_attention.training.run_folder import NotARunError
from keras_attention.training.run_folder import RunExistsError
from keras_attention.training.run_folder import RunFolderError
from keras_attention.training.run_folder import RunKeeper
from keras_attention.training.run_folder import RunOptionsError
from keras_attention.training.run_lock import RunLock
from keras_attention.training.schedules import CosineToBudget
from keras_attention.training.schedules import EpochWeights
from keras_attention.training.schedules import TimeLimit
from keras_attention.training.schedules import TrainingTime
from keras_attention.training.schedules import check_max_minutes

# The values of `TrainingRun(mixed_precision=...)` and `distribution=`.
MIXED_PRECISION = ("mixed_float16", "mixed_bfloat16")
DISTRIBUTIONS = ("data-parallel",)
# Recorded in every run's options. A resumed run may change the distribution
# and its device count (how it runs: a step's loss equals one device's), not
# the mixed-precision policy (what it trains: float16 or bfloat16 arithmetic,
# and under mixed_float16 a loss-scale optimizer whose state a float32 run
# does not hold).
RUN_OPTION_DEFAULTS = {"mixed_precision": None, "distribution": None, "devices": None}
DISTRIBUTION_SESSION_OPTIONS = ("distribution", "devices")


def add_run_arguments(parser, batch_size_note, *, max_minutes=None, run_dir=None):
    """Adds the flags of a run to an argparse parser: the one definition of
    `--run-dir`, `--overwrite`, `--seed`, `--max-minutes`, `--mixed-precision`
    and `--distribution`, which every command-line trainer on `TrainingRun`
    takes (`TrainingRun.from_args` reads the run's, `TrainingRun.fit` takes
    `max_minutes=args.max_minutes`). Values are checked by
    `keras_attention.arguments.cli_types`: a bad one exits with status 2 and
    one line naming the flag.

    Args:
        parser: an `argparse.ArgumentParser` (or a subcommand's parser).
        batch_size_note: str, what the trainer's batch size means under
            `--distribution` (e.g. "--batch-size is then per device").
        max_minutes: the default of `--max-minutes`, the time budget of the
            whole run (`schedules.check_max_minutes`); None: no budget.
        run_dir: the default of `--run-dir`; None: the flag is required.
    """
    parser.add_argument(
        "--run-dir",
        required=run_dir is None,
        default=run_dir,
        help="the run folder" + ("" if run_dir is None else " (default: %(default)s)"),
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a finished run, or start over a damaged one or one started with "
        "other options (never a folder that is not a run)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the weights, the dropout and the shuffling"
    )
    parser.add_argument(
        "--max-minutes",
        type=cli_types.positive_float,
        default=max_minutes,
        help="time budget: the training time of the whole run in minutes, summed over its "
        "resumes; the learning rate decays over it and training stops when it is spent "
        + ("(default: none)" if max_minutes is None else "(default: %(default)s)"),
    )
    parser.add_argument(
        "--mixed-precision",
        choices=MIXED_PRECISION,
        help="train in this dtype policy (a GPU or TPU's; a resumed run keeps it); "
        "export makes float32 models",
    )
    parser.add_argument(
        "--distribution",
        choices=DISTRIBUTIONS,
        help="JAX only (KERAS_BACKEND=jax): keras.distribution over every device JAX "
        f"sees; {batch_size_note}",
    )


def add_training_arguments(
    parser,
    *,
    batch_size,
    learning_rate,
    epochs,
    max_minutes,
    batch_size_note,
    intra_op_threads=0,
):
    """Adds the flags of a command-line trainer built on `TrainingRun`, with
    the trainer's defaults: those of `add_run_arguments` (`--run-dir`
    required), then `--batch-size`, `--learning-rate` (the peak of
    `TimeBudget`'s decay), `--epochs`, `--steps-per-epoch`,
    `--intra-op-threads` (`set_intra_op_threads`) and `--verbose`. Values are
    checked by `keras_attention.arguments.cli_types`.

    Args:
        parser: an `argparse.ArgumentParser` (or a subcommand's parser).
        batch_size: the default of `--batch-size`.
        learning_rate: the default of `--learning-rate`.
        epochs: the default of `--epochs`.
        max_minutes: the default of `--max-minutes`, as `add_run_arguments`
            takes it.
        batch_size_note: as `add_run_arguments` takes it.
        intra_op_threads: the default of `--intra-op-threads` (0: TensorFlow's).
    """
    add_run_arguments(parser, batch_size_note, max_minutes=max_minutes)
    parser.add_argument("--batch-size", type=cli_types.positive_int, default=batch_size)
    parser.add_argument(
        "--learning-rate", type=cli_types.positive_float, default=learning_rate, help="peak rate"
    )
    parser.add_argument(
        "--epochs",
        type=cli_types.positive_int,
        default=epochs,
        help="at most this many; the rate decays over them when they end first",
    )
    parser.add_argument(
        "--steps-per-epoch",
        type=cli_types.positive_int,
        help="batches per epoch (default: one pass over the data)",
    )
    parser.add_argument(
        "--intra-op-threads",
        type=cli_types.non_negative_int,
        default=intra_op_threads,
        help="TensorFlow's threads per operation; 0: its default",
    )
    parser.add_argument("--verbose", type=int, default=1, help="Keras' fit verbosity (2: a line)")


# What a diverged run's messages advise.
_START_OVER = "Start it over with `overwrite=True` and other options (a lower learning rate, say)."


class RunWriteError(OSError):
    """The run folder cannot be written (a read-only file system, no
    permission); the message names the folder. Nothing was changed."""

    def __str__(self):
        return self.strerror


class UntrainedRunError(RunFolderError):
    """`TrainingRun.load` of a folder without a trained model; the message
    names the missing files."""


class TrainingRun:
    """A training in a run folder: resumed after a kill, never mixed with
    another, never written into a folder that is not a run of this package.

    ```python
    run = TrainingRun(run_dir, options={"units": 16, "epochs": 3})
    model = run.fit(build_model, train_data, validation_data=val_data, epochs=3)
    ```

    `fit` does, in this order: checks the folder without writing to it (new
    or empty, or a run of this package by its mark; a finished one only with
    `overwrite`; an unfinished one only with the same `options`, else
    `RunOptionsError` naming them), takes its lock (`RunLock`), writes the
    mark and `config.json`, builds the model, puts back the weights and
    optimizer of the last finished epoch when the run resumes, trains with
    `model.fit` keeping the backup, `model.keras` (the best epoch's on
    `monitor`) and `history.csv` whole after each epoch (`RunKeeper`), and
    writes `finished.json` last. Its files are listed in
    `keras_attention.training.run_folder`.

    A client that writes files of its own into the run (vocabularies, learned
    before the model is built) uses the run as a context manager: the folder
    is checked, locked and prepared on entry, and `fit` then trains inside it.

    ```python
    with TrainingRun(run_dir, options, files=("vocab.json",)) as run:
        if run.state is None:  # a new run, or one with no epoch backed up
            write_vocab(run.run_dir / "vocab.json")
        run.fit(build_model, train_data, validation_data=val_data, epochs=3)
    ```

    Args:
        run_dir: the run folder (created).
        options: what the run trains (JSON values), written to `config.json`
            and compared with it when the run resumes, with `mixed_precision`,
            `distribution` and `devices` added. None: compare nothing (a
            check of the folder).
        session_options: keys of `options` that a resumed run may change
            (how it runs, not what it trains: a time budget, a device count).
        files: the names of the client's own files and folders in the run,
            removed with the run's when it is started over: relative paths
            inside the run (an absolute name, a `..` part, the run folder
            itself or its mark or lock file is refused with a `ValueError`
            naming it; nothing is removed through a link).
        overwrite: replace a finished run of this package, or start over a
            damaged one or an unfinished one started with other options. A
            folder that is not a run of this package is never touched.
        legacy: a function of a folder without the mark, True when it holds
            a finished run of an older version (read only: it is refused).
        setup: a function returning a context manager entered while the
            model is built, compiled and restored: a `tf.distribute`
            strategy's `scope` (for a policy, use `mixed_precision`). None:
            nothing.
        option_defaults: `{key: value}` that a run's `config.json` lacking
            `key` stands for when the options are compared (the value of an
            option before it existed).
        mixed_precision: None (float32), "mixed_float16" or
            "mixed_bfloat16": the dtype policy the model is built in (the
            global policy is put back afterwards). Checked here with
            `keras_attention.backend.precision.check_policy` (a runtime that cannot
            train in it is refused before anything is written). Recorded in
            the options as `mixed_precision`; a resumed run must keep it (it
            changes the arithmetic, and under mixed_float16 the optimizer).
            Export makes a float32 copy of such a model by itself.
        distribution: None, or "data-parallel": on JAX, the model is built,
            compiled and trained under `keras.distribution.DataParallel`
            (`keras_attention.training.distribution.data_parallel(devices)`), and a
            `tf.data.Dataset` or NumPy training and validation data have
            their last batch that does not divide by the device count padded
            with rows of sample weight 0 (`pad_dataset`, `pad_arrays`).
            Recorded as `distribution` and `devices` (the count); a resumed
            run may change both. On TensorFlow, use `setup` with a
            `tf.distribute` strategy's `scope` instead.
        devices: with `distribution`, None (every device JAX sees) or a count.
        clock: the clock the run's training time is read on, in seconds
            (tests inject one).

    Attributes:
        run_dir: the folder, a `Path`.
        state: on entry, the progress of the unfinished run it resumes
            (`backup/state.json`), or None when it starts from its first epoch.
        status: the folder's `RunStatus` before entry.
        training_time: on entry, the run's `TrainingTime`: the seconds its
            earlier sessions spent on the epochs it holds, plus this
            session's once `fit` trains. `fit(max_minutes=...)` spends it; a
            client's own schedule reads it (`CosineToBudget(clock=...)`).
    """

    def __init__(
        self,
        run_dir,
        options=None,
        *,
        session_options=(),
        files=(),
        overwrite=False,
        legacy=None,
        setup=None,
        option_defaults=None,
        mixed_precision=None,
        distribution=None,
        devices=None,
        clock=time.monotonic,
    ):
        self.run_dir = Path(run_dir)
        # Checked before anything is written: `check` and `fit` come later.
        files = run_folder.check_file_names(files, run_dir)
        self.mixed_precision = check_mixed_precision(mixed_precision)
        self.distribution = check_distribution(distribution, devices)
        self.options = dict(options or {})
        if options is not None or mixed_precision or distribution:
            # `options=None` with neither: a check of the folder, comparing nothing.
            self.options.update(
                mixed_precision=self.mixed_precision,
                distribution=distribution,
                devices=distribution_lib.device_count(self.distribution)
                if self.distribution
                else None,
            )
        self.session_options = (*session_options, *DISTRIBUTION_SESSION_OPTIONS)
        self.files = tuple(files)
        self.overwrite = overwrite
        self.legacy = legacy
        self.setup = setup
        self.option_defaults = dict(RUN_OPTION_DEFAULTS, **(option_defaults or {}))
        self.state = None
        self.status = None
        self.clock = clock
        self.training_time = None
        self._lock = None

    @classmethod
    def from_args(cls, args, options, **kwargs):
        """The run of a command line that `add_training_arguments` made: its
        `run_dir`, `overwrite`, `mixed_precision` and `distribution`.

        Args:
            args: the parsed `argparse.Namespace`.
            options: as the class takes them.
            **kwargs: the class's other arguments (`files`, ...).
        """
        return cls(
            args.run_dir,
            options,
            overwrite=args.overwrite,
            mixed_precision=args.mixed_precision,
            distribution=args.distribution,
            **kwargs,
        )

    # ------------------------------------------------------- the folder

    def check(self):
        """Checks what `__enter__` checks, writing nothing; returns the
        folder's `RunStatus`, or None when `overwrite` is to start it over.

        Raises:
            NotARunError: the folder holds something else than a run of this
                package (or a run of an older version, read only).
            RunExistsError: it holds a finished run and not `overwrite`.
            DivergedRunError: it holds a run whose training diverged and not
                `overwrite` (a `RunExistsError`).
            RunOptionsError: it holds an unfinished run started with other
                options and not `overwrite`.
            CorruptRunError: it holds a damaged run and not `overwrite`.
            NotADirectoryError: `run_dir` is a file.
        """
        try:
            status = run_folder.run_status(self.run_dir, legacy=self.legacy)
            if status.legacy:
                raise NotARunError(
                    f"{status.detail}. Nothing was changed. Train into a new folder; "
                    "this one stays as it is, to be loaded, evaluated or exported."
                )
            if status.state == UNFINISHED:
                run_folder.check_options(
                    self.run_dir,
                    self.options,
                    ignore=self.session_options,
                    defaults=self.option_defaults,
                )
        except CorruptRunError as error:
            if not self.overwrite:
                raise CorruptRunError(
                    f"{error} Pass `overwrite=True` to start the run over."
                ) from None
            return None
        except RunOptionsError:
            if not self.overwrite:
                raise
            return None
        if status.diverged and not self.overwrite:
            raise DivergedRunError(f"{status.detail}. Nothing was changed. {_START_OVER}")
        if status.state == FINISHED and not self.overwrite:
            # A new training would start from fresh weights and replace the model.
            raise RunExistsError(
                f"{self.run_dir} already holds a finished run. Nothing was changed. Use "
                "another run folder, or pass `overwrite=True` to replace it."
            )
        return status

    def __enter__(self):
        # Read-only first: a folder that is not a run of ours gets no lock
        # file. Checked again under the lock.
        self.check()
        self._lock = RunLock(self.run_dir)
        with _writable(self.run_dir):
            self._lock.__enter__()
        try:
            self.state = self._prepare()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc_info):
        self._release()
        return False

    def _release(self):
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.__exit__(None, None, None)

    def _prepare(self):
        """Readies the locked folder; returns the state to resume from, or None."""
        status = self.check()
        self.status = status
        if status is None or status.state == FINISHED:
            # overwrite. The marker goes first: a kill from here on leaves an
            # unfinished run, never a finished one with missing files.
            run_folder.clear(self.run_dir, self.files)
        # First in a new folder: from now on it is a run of ours.
        run_folder.write_mark(self.run_dir)
        run_folder.remove_temporaries(self.run_dir, self.files)
        state = run_folder.read_state(self.run_dir)
        if state is None:
            # No epoch backed up: the run starts over; the client's files
            # stay (their ids must not change), and the epochs of an older
            # run are not averaged with the new one's.
            run_folder.clear(self.run_dir, self.files, keep=(CONFIG_FILE, *self.files))
        # The time of the epochs the backup holds (0 in a state of a version
        # before it was recorded): an epoch a kill lost runs again, its time
        # with it.
        self.training_time = TrainingTime(state.get("seconds", 0.0) if state else 0.0, self.clock)
        return state

    def finished(self):
        """True when the folder holds a finished run of these options and
        `overwrite` is not set: there is nothing to train (`load` it).
        Writes nothing.

        Raises:
            RunOptionsError: the finished run was trained with other options
                (named): it is no answer to these.
            DivergedRunError: the run's training diverged (the epoch named):
                its model is no trained model of these options.
        """
        if self.overwrite:
            return False
        status = run_folder.run_status(self.run_dir, legacy=self.legacy)
        if status.state != FINISHED or status.legacy:
            return False
        if status.diverged:
            raise DivergedRunError(f"{status.detail}. {_START_OVER}")
        run_folder.check_options(
            self.run_dir, self.options, ignore=self.session_options, defaults=self.option_defaults
        )
        return True

    @staticmethod
    def load(run_dir, files=()):
        """`(model, config, contents)` of a run that has trained at least one
        epoch (finished or not): `model.keras` loaded in safe mode (in the
        run's mixed-precision policy, so that its optimizer loads whole),
        `config.json`, and the JSON of each of the client's `files`, in order.

        A run whose training diverged gives the best epoch before it, with a
        `RuntimeWarning` that says so.

        Raises:
            UntrainedRunError: a file is missing (the message names them), or
                the run diverged in its first epoch (said so).
            keras_attention.files.model_file.ModelFileError: `model.keras` cannot
                be loaded (one line naming it).
        """
        run_dir = Path(run_dir)
        paths = [run_dir / name for name in (MODEL_FILE, CONFIG_FILE, *files)]
        missing = [str(path) for path in paths if not path.exists()]
        finished = run_dir / FINISHED_FILE
        info = run_folder.read_json(finished) if finished.exists() else {}
        if isinstance(info.get("diverged"), dict):
            detail = run_folder.diverged_detail(run_dir, info)
            if missing:
                raise UntrainedRunError(f"{detail}. Nothing to load. {_START_OVER}")
            warnings.warn(f"{detail}; that model is loaded.", RuntimeWarning, stacklevel=2)
        if missing:
            raise UntrainedRunError(
                f"{run_dir} is not a finished run (missing {', '.join(missing)}); "
                "train it first (at least one epoch)"
            )
        config = run_folder.read_json(paths[1])
        # Loaded in the policy it trained in: under mixed_float16 the model
        # then compiles with its LossScaleOptimizer and gets its state back.
        with precision.policy_scope(config.get("mixed_precision")):
            model = load_model(paths[0])
        return model, config, [run_folder.read_json(p) for p in paths[2:]]

    @staticmethod
    def load_ensemble(run_dirs, files=(), same=()):
        """`TrainingRun.load` of each run in `run_dirs`, in order, for runs
        that decode as one model (`keras_attention.generation.EnsembleGenerator`):
        every run must hold the same JSON in each of `files` (a vocabulary
        keeps one id per token) and the same value of each option in `same`
        (the data it was trained on). The first run is the one the others
        are compared with.

        Raises:
            RunOptionsError: a run differs from the first in one of `files`
                or `same` (both runs and the file or option named;
                `differences` holds {name: (its value, the first run's)}).
            UntrainedRunError, ModelFileError: as `load` raises them.
        """
        run_dirs = list(run_dirs)
        if not run_dirs:
            raise ValueError("Invalid value for argument `run_dirs`. Expected at least one run.")
        runs = [TrainingRun.load(run_dir, files) for run_dir in run_dirs]
        first, (_, config, contents) = run_dirs[0], runs[0]
        for run_dir, (_, other_config, other_contents) in zip(run_dirs[1:], runs[1:], strict=True):
            for name, mine, theirs in zip(files, contents, other_contents, strict=True):
                if mine != theirs:
                    raise RunOptionsError(
                        f"{run_dir} has another {name} than {first}: the runs of an "
                        "ensemble must share it",
                        {name: (theirs, mine)},
                    )
            for option in same:
                theirs, mine = other_config.get(option), config.get(option)
                if theirs != mine:
                    raise RunOptionsError(
                        f"{run_dir} was trained with {option} {theirs!r} and {first} with "
                        f"{mine!r}: the runs of an ensemble must agree on it",
                        {option: (theirs, mine)},
                    )
        return runs

    @property
    def initial_epoch(self):
        """The epochs already done: where `fit` starts."""
        return self.state["epoch"] if self.state else 0

    def write_config(self, **extra):
        """Writes `config.json`: the options and `extra` (values the run
        learned, e.g. a vocabulary's size). Inside the run only."""
        self._check_entered("write_config")
        write_json(self.run_dir / CONFIG_FILE, dict(self.options, **extra))

    def client_json(self, name, value):
        """The JSON object of the client's file `name`, one of `files`: `value`
        written whole in a run that does not hold the file yet, else what the
        file holds (a resumed run keeps it: a vocabulary keeps its ids).
        Inside the run only.

        Raises:
            ValueError: `name` is not one of `files` (starting the run over
                would not remove it).
        """
        self._check_entered("client_json")
        self._check_file(name)
        path = self.run_dir / name
        if path.exists():
            return run_folder.read_json(path)
        write_json(path, value)
        return value

    def time_budget(self, max_minutes, peak, floor, name="progress.json", **options):
        """A `TimeBudget` callback for `fit` whose state is the run's file
        `name` (one of `files`), with the epochs a kill did not back up
        forgotten (`TimeBudget.keep_epochs`). Inside the run only.

        Args:
            max_minutes: the time budget of the whole run, in minutes, as
                `fit` takes it.
            peak: the rate after the warm-up.
            floor: the rate at the end.
            name: the run's file of the budget's state.
            **options: `warmup_steps` and `total_steps`, as `TimeBudget` takes.

        Raises:
            ValueError: `name` is not one of `files`.
        """
        from keras_attention.training.time_budget import TimeBudget

        self._check_entered("time_budget")
        self._check_file(name)
        budget = TimeBudget(max_minutes, peak, floor, self.run_dir / name, **options)
        budget.keep_epochs(self.initial_epoch)
        return budget

    def _check_file(self, name):
        if name not in self.files:
            raise ValueError(
                f"Invalid value for argument `name`. Expected one of the run's `files` "
                f"{self.files}. Received: name={name!r}"
            )

    def _check_entered(self, method):
        if self._lock is None:
            raise RuntimeError(
                f"TrainingRun.{method}: the run is not entered; call it inside "
                "`with TrainingRun(...) as run:` (or use `fit`, which enters it)."
            )

    # ---------------------------------------------------------- training

    def fit(
        self,
        model,
        x=None,
        y=None,
        *,
        epochs,
        validation_data=None,
        callbacks=(),
        monitor="val_loss",
        learning_rate=None,
        max_minutes=None,
        keep_epochs=False,
        verbose=None,
        **fit_kwargs,
    ):
        """Trains `model` into the run, or resumes it; returns the model.

        Args:
            model: a compiled Keras model, or a function of no arguments
                returning one (built inside `setup`).
            x: the training data, as `model.fit` takes it.
            y: the targets, as `model.fit` takes them (None for a dataset).
            epochs: the epochs of the whole run (a resumed run does the rest).
            validation_data: as `model.fit` takes it; the best model is
                chosen on `monitor`, a validation value by default.
            callbacks: the client's callbacks, run before the run's own.
            monitor: the log `model.keras` is chosen on (lower is better);
                None: `model.keras` is the last epoch's.
            learning_rate: when given, the rate falls on a cosine from it over
                the epochs or `max_minutes`, whichever ends first
                (`CosineToBudget`).
            max_minutes: the time budget: the training time of the whole run
                in minutes, summed over the sessions a killed run resumes in
                (`training_time`), as a user who kills and resumes a run
                expects; training stops after the epoch that spends it, and a
                run resumed with it spent trains no more. A finite number
                above 0, or None: no budget.
            keep_epochs: also save every epoch's weights in `RUN_DIR/epochs`
                (checkpoint averaging).
            verbose: as `model.fit`'s; None: 1 on a terminal, else 2.
            **fit_kwargs: passed on to `model.fit` (`steps_per_epoch`, ...).

        Raises:
            RunFolderError: as `check` raises it; `RunInUseError` when another
                process holds the folder's lock (named).
            CorruptRunError: as `check` raises it.
            RunWriteError: the folder cannot be written (read-only).
            keras_attention.files.atomic.DiskFullError: the disk filled
                up; the run resumes once there is space.
            ValueError: `max_minutes` is 0, negative, NaN or infinite
                (nothing is written).
        """
        check_max_minutes(max_minutes)
        # Entered here when the caller did not enter the run (`with run:`).
        entered = contextlib.nullcontext() if self._lock is not None else self
        with entered:
            if not (self.run_dir / CONFIG_FILE).exists():
                self.write_config()
            scope = self.distribution.scope() if self.distribution else contextlib.nullcontext()
            with scope:
                return self._fit(
                    model,
                    x,
                    y,
                    epochs=epochs,
                    validation_data=validation_data,
                    callbacks=callbacks,
                    monitor=monitor,
                    learning_rate=learning_rate,
                    max_minutes=max_minutes,
                    keep_epochs=keep_epochs,
                    verbose=verbose,
                    **fit_kwargs,
                )

    def _built_model(self, model, state):
        """The model `fit` trains: built (from a function) in the run's
        policy and under its setup, restored from the run's last backed-up
        epoch on resume."""
        with (
            precision.policy_scope(self.mixed_precision),
            self.setup() if self.setup else contextlib.nullcontext(),
        ):
            if not isinstance(model, keras.Model):
                model = model()
            elif self.mixed_precision and model.dtype_policy.name != self.mixed_precision:
                raise ValueError(
                    f"Invalid value for argument `model`: with mixed_precision="
                    f"{self.mixed_precision!r}, pass a function that builds the model "
                    f"(it is built in that policy). Received: a model built in "
                    f"{model.dtype_policy.name!r}"
                )
            if state is not None:
                # A killed run restarts after its last backed-up epoch.
                print(f"resuming {self.run_dir} after epoch {state['epoch']}", flush=True)
                run_folder.restore(model, self.run_dir, state)
        return model

    def _callbacks(self, callbacks, epochs, monitor, learning_rate, max_minutes, keep_epochs):
        """The user's callbacks and the run's, and the run's `RunKeeper`."""
        training_time = self.training_time
        callbacks = list(callbacks)
        if learning_rate is not None:
            callbacks.append(
                CosineToBudget(learning_rate, epochs, max_minutes, clock=training_time)
            )
        if keep_epochs:
            callbacks.append(EpochWeights(self.run_dir))
        if max_minutes is not None:
            callbacks.append(TimeLimit(max_minutes, training_time))
        # Last, so that it backs up what the others left: the averaged
        # weights, the epoch's learning rate in the logs, the decision to stop.
        keeper = RunKeeper(self.run_dir, self.state, monitor=monitor, training_time=training_time)
        return callbacks + [keeper], keeper

    def _fit(
        self,
        model,
        x,
        y,
        *,
        epochs,
        validation_data,
        callbacks,
        monitor,
        learning_rate,
        max_minutes,
        keep_epochs,
        verbose,
        **fit_kwargs,
    ):
        """`fit` in an entered run, under its distribution's scope."""
        state = self.state
        if self.distribution:
            x, y, validation_data, fit_kwargs = _pad_for_devices(
                self.options["devices"], x, y, validation_data, fit_kwargs
            )
        model = self._built_model(model, state)
        if self.distribution:
            # Refused before the first step: a loss or metric that the padded
            # rows of weight 0 would change.
            distribution_lib.check_padding_exact(model, x.element_spec[0] if _is_dataset(x) else x)
        training_time = self.training_time
        callbacks, keeper = self._callbacks(
            callbacks, epochs, monitor, learning_rate, max_minutes, keep_epochs
        )
        start = time.time()
        spent = max_minutes is not None and training_time() >= max_minutes * 60
        if state is None or not (state["stopped"] or state["epoch"] >= epochs or spent):
            training_time.start()
            model.fit(
                x,
                y,
                validation_data=validation_data,
                epochs=epochs,
                initial_epoch=self.initial_epoch,
                callbacks=callbacks,
                verbose=(1 if sys.stdout.isatty() else 2) if verbose is None else verbose,
                **fit_kwargs,
            )
        minutes = (time.time() - start) / 60
        if keeper.diverged is None:
            print(
                f"training took {minutes:.1f} min in this process, {len(keeper.history)} "
                f"epochs in all; model: {self.run_dir / MODEL_FILE}"
            )
        config = run_folder.read_json(self.run_dir / CONFIG_FILE)
        write_json(self.run_dir / CONFIG_FILE, dict(config, train_minutes_last_session=minutes))
        info = {
            "epochs": len(keeper.history),
            "best_epoch": keeper.best_epoch,
            **({"best_" + monitor: keeper.best} if monitor else {}),
        }
        if keeper.diverged is not None:
            # The diverged epoch's weights, saved by `EpochWeights` before the
            # keeper saw them, are not averaged with the finite ones.
            for epoch in averaging.saved_epochs(self.run_dir):
                if epoch > len(keeper.history):
                    averaging.epoch_weight_path(self.run_dir, epoch).unlink()
            info["diverged"] = keeper.diverged
        # Last: until this file exists, the run is unfinished and resumes.
        run_folder.finish(self.run_dir, info)
        if keeper.diverged is not None:
            detail = run_folder.diverged_detail(self.run_dir, info)
            raise DivergedRunError(
                f"Training stopped: {detail}. The run is finished there. {_START_OVER}"
            )
        return model


def check_mixed_precision(mixed_precision):
    """`TrainingRun`'s `mixed_precision`, checked (`PolicyError`): None, or
    a policy of `MIXED_PRECISION` that this backend and device can train in."""
    if mixed_precision is None:
        return None
    if mixed_precision not in MIXED_PRECISION:
        raise precision.PolicyError(
            f"Invalid value for argument `mixed_precision`. Expected None or one of "
            f"{MIXED_PRECISION}. Received: mixed_precision={mixed_precision!r}"
        )
    return precision.check_policy(mixed_precision)


def check_distribution(distribution, devices=None):
    """`TrainingRun`'s `distribution`, made: None, or the
    `keras.distribution.DataParallel` over `devices`.

    Raises:
        DistributionError: an unknown value, `devices` without a
            distribution, the wrong backend (on TensorFlow the message points
            to tf.distribute), or more devices than JAX sees.
    """
    if distribution is None:
        if devices is not None:
            raise distribution_lib.DistributionError(
                "Invalid value for argument `devices`: it needs "
                f'distribution="data-parallel". Received: devices={devices!r}'
            )
        return None
    if distribution not in DISTRIBUTIONS:
        raise distribution_lib.DistributionError(
            f"Invalid value for argument `distribution`. Expected None or one of "
            f"{DISTRIBUTIONS}. Received: distribution={distribution!r}"
        )
    distribution_lib.check_jax_backend(f"distribution={distribution!r}")
    return distribution_lib.data_parallel(devices)


def _pad_for_devices(devices, x, y, validation_data, fit_kwargs):
    """The data of `fit`, every batch dividing by `devices`: a batched
    `tf.data.Dataset` padded by `pad_dataset`, NumPy arrays by `pad_arrays`
    (with `batch_size` a multiple of `devices`). Padded rows weigh 0."""
    fit_kwargs = dict(fit_kwargs)
    if _is_dataset(x):
        x = distribution_lib.pad_dataset(x, devices)
    elif x is not None and y is not None and not _is_dataset(y):
        batch_size = fit_kwargs.get("batch_size") or 32
        x, y, weight = distribution_lib.pad_arrays(
            x, y, fit_kwargs.pop("sample_weight", None), devices, batch_size
        )
        fit_kwargs["sample_weight"] = weight
    else:
        raise distribution_lib.DistributionError(
            "Invalid value for argument `x`: under distribution='data-parallel', "
            "training data is a batched tf.data.Dataset or NumPy arrays `x` and `y`, "
            f"whose last batch is padded to the {devices} devices. Received: "
            f"x of type {type(x).__name__}"
        )
    if _is_dataset(validation_data):
        validation_data = distribution_lib.pad_dataset(validation_data, devices)
    elif isinstance(validation_data, tuple) and len(validation_data) in (2, 3):
        vx, vy, *vw = validation_data
        validation_data = distribution_lib.pad_arrays(
            vx, vy, vw[0] if vw else None, devices, fit_kwargs.get("validation_batch_size")
        )
    elif validation_data is not None:
        raise distribution_lib.DistributionError(
            "Invalid value for argument `validation_data`: under "
            "distribution='data-parallel', a batched tf.data.Dataset or a tuple of "
            f"NumPy arrays. Received: {type(validation_data).__name__}"
        )
    return x, y, validation_data, fit_kwargs


def _is_dataset(value):
    return type(value).__module__.startswith("tensorflow") and hasattr(value, "element_spec")


@contextlib.contextmanager
def _writable(run_dir):
    """Says in one line that `run_dir` cannot be written, instead of the
    traceback of the first write."""
    try:
        yield
    except OSError as error:
        if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            reason = {errno.EROFS: "it is on a read-only file system"}.get(
                error.errno, "permission denied"
            )
            raise RunWriteError(
                error.errno,
                f"Cannot write the run folder {run_dir}: {reason} "
                f"({error.filename or run_dir}). Nothing was changed. Train into a "
                "folder you can write.",
            ) from None
        raise

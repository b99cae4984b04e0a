"""English to French on Multi30k with attention: train, evaluate, translate, explain, export.

    keras-attention-translate [--data-dir DIR] [--verbose] COMMAND [options]
    python -m keras_attention.translation ...   (the same)

--verbose also shows TensorFlow's INFO lines (the SavedModel writer's) and its
C++ start-up log (keras_attention.backend.native_log).

Commands (each has --help):

    train      learn the vocabularies and the model; a killed run resumes
    status     whether a run folder holds a new, unfinished or finished run
    evaluate   BLEU, chrF, BLEU by source length, attention heatmaps
    translate  sentences from the command line or stdin
    explain    replace the attention weights (uniform, permuted) and measure
               how much the output changes
    average    a run whose model is the mean of another run's last epochs
               (trained with --keep-epochs)
    export     a SavedModel and TFLite models of a run (the options of
               python -m keras_attention.translation.export)

Time on a 2-core CPU: `train --preset tiny` about two minutes; the default
preset about an hour. The data comes from `--data-dir`, the environment
variable KERAS_ATTENTION_MULTI30K_DIR, or a download into the Keras cache.
"""

import argparse
import contextlib
import logging

import keras

from keras_attention.arguments.cli_types import positive_float as _positive_float
from keras_attention.arguments.cli_types import positive_int as _positive_int
from keras_attention.arguments.cli_types import unit_interval as _unit_interval
from keras_attention.backend import native_log
from keras_attention.backend.check import TRANSLATOR_NEEDS
from keras_attention.backend.check import require_packages
from keras_attention.backend.precision import PolicyError
from keras_attention.export.arguments import beam_width as _beam_width
from keras_attention.export.arguments import penalty as _penalty
from keras_attention.files.atomic import DiskFullError
from keras_attention.files.file_errors import end_command
from keras_attention.files.file_errors import file_errors
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import MAX_BEAM_WIDTH
from keras_attention.training.distribution import DistributionError
from keras_attention.training.run_folder import CorruptRunError
from keras_attention.training.run_folder import RunFolderError
from keras_attention.training.training_run import RunWriteError
from keras_attention.training.training_run import add_run_arguments
from keras_attention.translation import commands
from keras_attention.translation import distribute
from keras_attention.translation import export
from keras_attention.translation import training
from keras_attention.translation.model import ATTENTIONS
from keras_attention.translation.model import DECODER_INITS
from keras_attention.translation.model import ENCODER_LAYERS
from keras_attention.translation.model import POLICIES
from keras_attention.translation.training import PRESETS

COMMANDS = ("train", "status", "evaluate", "translate", "explain", "average", "export")
# The run folder of the commands that take --run-dir, `train` included.
RUN_DIR = "runs/bahdanau"
# What --batch-size means under --distribution (`add_run_arguments`).
BATCH_SIZE_NOTE = "--batch-size is then per device"
# Libraries whose INFO lines are for their own developers, shown with
# --verbose: TensorFlow's SavedModel writer says "Assets written to:
# .../assets" for each file (the TFLite converter's temporary folders too)
# and "Function `greedy` contains input name(s) ... with unsupported
# characters" (the search loop's captured tensors, renamed in the file).
LIBRARY_LOGGERS = ("tensorflow", "absl")


def _indices(text):
    try:
        indices = [int(i) for i in text.split(",") if i.strip()] if text else []
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated sentence numbers, got {text}"
        ) from None
    if any(i < 0 for i in indices):
        raise argparse.ArgumentTypeError(f"expected sentence numbers from 0, got {text}")
    return indices


def _wait_k_schedule(text):
    """`train --wait-k`: K, one k >= 1, or LOW:HIGH, every k from LOW to HIGH."""
    expected = f"a k of 1 or more (K) or a range LOW:HIGH with 1 <= LOW <= HIGH, got {text}"
    parts = text.split(":")
    try:
        values = [int(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}") from None
    if len(values) > 2 or min(values) < 1 or values[0] > values[-1]:
        raise argparse.ArgumentTypeError(f"expected {expected}")
    return values[0] if len(values) == 1 else values


def _wait_k_list(text):
    """`evaluate --wait-k`: comma-separated ks, each 1 or more."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated ks of 1 or more (1,2,3,5,7), got {text}"
        )
    return values


# Each takes the parsed options and returns what the command returns.


def _train(args):
    # The options that contradict each other, said with the flags' names.
    if args.conditional and args.attention != "bahdanau":
        raise SystemExit(
            f"train: --conditional is a Bahdanau decoder; it cannot be used with "
            f"--attention {args.attention}"
        )
    _check_policy_flags(args)
    if args.max_minutes and args.strategy == "multi-worker":
        raise SystemExit("train: --max-minutes cannot be used with --strategy multi-worker")
    if args.distribution and args.strategy != "one-device":
        raise SystemExit(
            f"train: --distribution {args.distribution} (keras.distribution, JAX) cannot be "
            f"used with --strategy {args.strategy} (tf.distribute, TensorFlow)"
        )
    if args.distribution and keras.backend.backend() != "jax":
        raise SystemExit(
            f"train: --distribution {args.distribution} needs the JAX backend "
            f"(KERAS_BACKEND=jax); the backend is {keras.backend.backend()!r}. On "
            "TensorFlow, train on several devices with --strategy mirrored (one machine) "
            "or --strategy multi-worker"
        )
    try:
        return _train_run(args)
    except (
        PolicyError,
        DistributionError,
        RunFolderError,
        CorruptRunError,
        RunWriteError,
        DiskFullError,
    ) as error:
        raise commands.command_error("train", error) from None


def _check_policy_flags(args):
    """`train`'s flags of the streaming model, refused in one line without
    --policy or beside an option of the offline model."""
    if args.policy is None:
        for flag, value in (("--wait-k", args.wait_k), ("--encoder-layers", args.encoder_layers)):
            if value is not None:
                raise SystemExit(
                    f"train: {flag} sets the streaming model of a simultaneous run; give "
                    f"--policy ({', '.join(POLICIES)})"
                )
        return
    if args.wait_k is not None and args.policy != "wait-k":
        raise SystemExit(f"train: --wait-k is the schedule of --policy wait-k, not {args.policy}")
    if args.policy == "wait-k" and args.wait_k is None:
        raise SystemExit("train: --policy wait-k needs --wait-k K (or LOW:HIGH)")
    if args.attention != "bahdanau":
        raise SystemExit(
            f"train: --policy {args.policy} has Bahdanau (MLP) attention; it cannot be used "
            f"with --attention {args.attention}"
        )
    if args.decoder_init is not None:
        raise SystemExit(
            f"train: --decoder-init is the offline model's bridge; --policy {args.policy}'s "
            "decoder starts from zeros, before the source has ended"
        )


def _train_run(args):
    return training.train_run(
        args.run_dir,
        input_feeding=not args.no_input_feeding,
        **_options(
            args,
            "data_dir",
            "preset",
            "attention",
            "lr_schedule",
            "patience",
            "max_minutes",
            "seed",
            "keep_epochs",
            "overwrite",
            "strategy",
            "mixed_precision",
            "distribution",
            "policy",
            "wait_k",
            "encoder_layers",
        ),
        **{key: getattr(args, key, None) for key in PRESETS[args.preset]},
    )


def _options(args, *names):
    """The parsed options `names`, as keyword arguments of the same names."""
    return {name: getattr(args, name) for name in names}


def _status(args):
    return commands.status(args.run_dir)


def _evaluate(args):
    return commands.evaluate(
        args.run_dir,
        splits=args.splits.split(","),
        methods=args.methods.split(",") if args.methods else None,
        **_options(
            args,
            "data_dir",
            "beam_width",
            "length_penalty",
            "batch_size",
            "baseline_run_dir",
            "heatmaps",
            "max_sentences",
            "out_dir",
            "wait_k",
        ),
    )


def _average(args):
    return commands.average(args.run_dir, args.last, args.out_dir, overwrite=args.overwrite)


def _translate(args):
    return commands.translate(
        args.run_dir,
        args.sentences,
        method=args.method,
        beam_width=args.beam_width,
        length_penalty=args.length_penalty,
        batch_size=args.batch_size,
    )


def _explain(args):
    return commands.explain(
        args.run_dir, **_options(args, "data_dir", "split", "max_sentences", "batch_size", "seed")
    )


def _export(args):
    code = export.run_export(args)  # checks that the output can be written first
    if code:
        raise SystemExit(code)
    return code


def build_parser(prog=None):
    """The `argparse` parser of the command line; `prog` names it in usage."""
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", help="folder with the Multi30k .gz files")
    parser.add_argument(
        "--verbose", action="store_true", help="also TensorFlow's INFO lines (export's files)"
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    _add_train(subparsers)
    p = subparsers.add_parser("status", help="whether a run is new, unfinished or finished")
    _add_run_dir(p)
    p.set_defaults(func=_status)
    _add_evaluate(subparsers)
    _add_average(subparsers)
    _add_translate(subparsers)
    _add_explain(subparsers)
    # The options of `python -m keras_attention.translation.export`, from
    # the one function that defines them.
    p = subparsers.add_parser(
        "export",
        help="export a run as a SavedModel and TFLite models (RUN_DIR OUT_DIR; see export --help)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_run_export_arguments(p)
    p.set_defaults(func=_export)
    return parser


def _add_run_dir(p, help=None):
    p.add_argument("--run-dir", default=RUN_DIR, help=help)


def _add_beam_options(p):
    """The beam search's options, their defaults those of `search_defaults`."""
    p.add_argument(
        "--beam-width",
        type=_beam_width,
        default=BEAM_WIDTH,
        help=f"at most {MAX_BEAM_WIDTH} and the target vocabulary (default: %(default)s)",
    )
    p.add_argument(
        "--length-penalty",
        type=_penalty,
        default=LENGTH_PENALTY,
        help="the GNMT alpha, a number >= 0; 0: none (default: %(default)s)",
    )


def _add_train(subparsers):
    """`train`: the translator's own options, and the library's flags of a
    run (`add_run_arguments`: --run-dir, --overwrite, --seed, --max-minutes,
    --mixed-precision, --distribution), defined there only."""
    p = subparsers.add_parser("train", help="train a translator")
    p.add_argument("--attention", choices=ATTENTIONS, default="bahdanau")
    p.add_argument("--preset", choices=sorted(PRESETS), default="default")
    _add_model_options(p)
    p.add_argument(
        "--policy",
        choices=POLICIES,
        help="a simultaneous (streaming) model: unidirectional GRU encoder, no bridge, "
        "Bahdanau attention read under this read/write policy (consecutive: k = "
        "infinity); default: the offline model (bidirectional encoder)",
    )
    p.add_argument(
        "--wait-k",
        type=_wait_k_schedule,
        metavar="K|LOW:HIGH",
        help="--policy wait-k: read K source subwords before the first write; LOW:HIGH "
        "trains every k of the range at once (decoding then uses k = HIGH)",
    )
    p.add_argument(
        "--encoder-layers",
        type=_positive_int,
        help=f"--policy only: the encoder's GRU layers (default: {ENCODER_LAYERS})",
    )
    p.add_argument("--patience", type=int, default=3, help="early stopping")
    p.add_argument(
        "--lr-schedule",
        choices=("cosine", "plateau"),
        default="cosine",
        help="cosine: decay over the epochs or --max-minutes, whichever ends first; "
        "plateau: halve after an epoch without a better validation loss",
    )
    p.add_argument(
        "--keep-epochs",
        action="store_true",
        help="save the weights after every epoch in RUN_DIR/epochs (for `average`)",
    )
    p.add_argument(
        "--strategy",
        choices=distribute.STRATEGIES,
        default="one-device",
        help="tf.distribute strategy; --batch-size is then per replica",
    )
    add_run_arguments(p, BATCH_SIZE_NOTE, run_dir=RUN_DIR)
    p.set_defaults(func=_train)


def _add_model_options(p):
    """The options of `train` that override its preset (default None: the
    preset's value)."""
    p.add_argument("--epochs", type=_positive_int)
    p.add_argument("--batch-size", type=_positive_int)
    p.add_argument("--embedding-dim", type=_positive_int)
    p.add_argument("--units", type=_positive_int)
    p.add_argument(
        "--encoder-units",
        type=_positive_int,
        help="GRU size of each encoder direction (default: units / 2)",
    )
    p.add_argument("--dropout", type=_unit_interval)
    p.add_argument("--learning-rate", type=_positive_float)
    p.add_argument("--vocab-size", type=_positive_int)
    p.add_argument("--max-train-examples", type=_positive_int, help="train on the first N pairs")
    p.add_argument(
        "--label-smoothing", type=_unit_interval, help="ε of the smoothed targets; 0: none"
    )
    p.add_argument(
        "--ema-momentum",
        type=_unit_interval,
        help="keep an exponential moving average of the weights for validation "
        "and the saved model; 0: none",
    )
    p.add_argument(
        "--tie-embeddings",
        action=argparse.BooleanOptionalAction,
        help="score the target tokens with the target embedding matrix (TiedEmbedding)",
    )
    p.add_argument("--no-input-feeding", action="store_true", help="Luong only")
    p.add_argument(
        "--conditional",
        action=argparse.BooleanOptionalAction,
        help="bahdanau only: the conditional (two-cell) GRU decoder of the published "
        "systems, or (--no-conditional) the plain Bahdanau decoder",
    )
    p.add_argument(
        "--decoder-init",
        choices=DECODER_INITS,
        help="what the first decoder state reads: the encoder's final states, or the "
        "mean of its outputs over the source tokens",
    )


def _add_evaluate(subparsers):
    p = subparsers.add_parser("evaluate", help="score a trained run")
    _add_run_dir(p)
    p.add_argument("--splits", default=",".join(commands.TEST_SPLITS))
    p.add_argument(
        "--methods",
        help="greedy and/or beam (default: greedy,beam; greedy for a simultaneous run)",
    )
    p.add_argument(
        "--wait-k",
        type=_wait_k_list,
        metavar="K,K,...",
        help="a wait-k run: the ks to decode with, each scored with AP, AL and DAL "
        "(default: the k trained, every k of a trained range)",
    )
    _add_beam_options(p)
    p.add_argument("--batch-size", type=_positive_int, default=64)
    p.add_argument("--baseline-run-dir", help="a run with --attention none")
    p.add_argument("--heatmaps", type=_indices, default=[0, 1, 2], help="sentence indices to plot")
    p.add_argument("--max-sentences", type=_positive_int, help="score only the first N")
    p.add_argument("--out-dir", help="default: RUN_DIR/eval")
    p.set_defaults(func=_evaluate)


def _add_average(subparsers):
    p = subparsers.add_parser("average", help="average a run's last epochs")
    _add_run_dir(p, help="trained with --keep-epochs")
    p.add_argument("--last", type=_positive_int, required=True, help="how many of the last epochs")
    p.add_argument("--out-dir", required=True, help="the new run folder")
    p.add_argument("--overwrite", action="store_true", help="replace a run in --out-dir")
    p.set_defaults(func=_average)


def _add_translate(subparsers):
    p = subparsers.add_parser(
        "translate",
        help="translate sentences",
        description="Prints one translation per input, blank lines included: one "
        "per line of standard input, a line ending at a line feed only (a carriage "
        "return inside it reads as a space). The inputs are translated --batch-size "
        "at a time and printed as they come. A sentence of more source tokens than "
        "the model's max_source_length (512) or a line of standard input that is "
        "not UTF-8 stops it with an error naming the line, before its batch is "
        "translated.",
    )
    p.add_argument(
        "sentences", nargs="*", help="English sentences (else one per line of stdin, UTF-8)"
    )
    _add_run_dir(p)
    p.add_argument(
        "--method",
        choices=("greedy", "beam"),
        help="default: beam; greedy for a simultaneous run, which prints its trace too",
    )
    _add_beam_options(p)
    p.add_argument(
        "--batch-size",
        type=_positive_int,
        default=commands.TRANSLATE_BATCH,
        help="sentences translated (and printed) at once",
    )
    p.set_defaults(func=_translate)


def _add_explain(subparsers):
    p = subparsers.add_parser("explain", help="attention ablations")
    _add_run_dir(p)
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--max-sentences", type=_positive_int, default=1000)
    p.add_argument("--batch-size", type=_positive_int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_explain)


def parse_args(argv=None, prog=None):
    """The parsed options of `argv` (default: `sys.argv[1:]`)."""
    return build_parser(prog).parse_args(argv)


def main(argv=None, prog=None):
    """Runs the command of `argv` (default: `sys.argv[1:]`); returns its result:
    the run folder of `train` and `average`, the scores of `evaluate`, the
    translations of `translate` (from standard input, their number), the
    table of `explain`, the `RunStatus` of `status`, 0 for `export`. A command
    that fails raises `SystemExit` with its message, a file's error too (a
    full disk, a read-only file system, a FIFO where a file is read:
    `COMMAND: PATH: ...`, `keras_attention.files.file_errors`)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    args = parse_args(argv, prog)
    require_packages(args.command, TRANSLATOR_NEEDS[args.command])
    with library_logging(args.verbose), file_errors(args.command):
        return args.func(args)


class _PrintedByItsOwnHandler(logging.Filter):
    """Drops a library's record at the root when the library's logger has a
    handler of its own, which printed it already (TensorFlow adds one)."""

    def filter(self, record):
        name = record.name.split(".")[0]
        return not (name in LIBRARY_LOGGERS and logging.getLogger(name).handlers)


@contextlib.contextmanager
def library_logging(verbose=False):
    """While a command runs: the libraries' INFO lines only when `verbose`
    (their warnings always), and each line once; restored afterwards."""
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    levels = [logger.level for logger in loggers]
    once = _PrintedByItsOwnHandler()
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(once)
    if not verbose:
        for logger in loggers:
            logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
        for handler in handlers:
            handler.removeFilter(once)


def console_main(argv=None, prog=None):
    """`main` for a shell: the exit status, 0 (the console script
    `keras-attention-translate` and `python -m keras_attention.translation`).

    A run folder that cannot be read (missing, damaged, not a run) is said in
    one line, `error: message`, with exit status 1, not a traceback; so is a
    file that cannot be written or read (a full disk, a read-only file
    system). A command that fails ends the process at once, and a closed
    standard output (`translate ... | head -1`) ends it quietly with status
    141 (`keras_attention.files.file_errors.end_command`). Called with
    `argv` None (from a shell), a command that fails ends the process at
    once; with `argv`, it raises `SystemExit`.
    """

    def run():
        try:
            main(argv, prog)
        except (RunFolderError, CorruptRunError) as error:
            raise commands.command_error("error", error) from None
        return 0

    return end_command(
        run, "error", exit_process=argv is None, before_exit=(native_log.stop_filter,)
    )

"""Training a translator into a run folder that survives being killed.

`train_run(run_dir, preset="tiny")` does what `python -m keras_attention.translation
train` does: it learns the WordPiece vocabularies from the training split (once
per run: a resumed run reads them back), builds and compiles `build_translator`
under a `tf.distribute` strategy, trains with `model.fit` and leaves the run
folder that `load_run`, `export_run` and the other commands read (its files are
listed in `keras_attention.translation.runs`). A run killed at any instant
resumes after its last finished epoch when `train_run` is called again with the
same folder; a finished one is refused unless `overwrite=True`.

The run folder is a `keras_attention.training.TrainingRun` (the lock, the
mark, the backup, the resume, the finished marker); this module adds the
translator's data, vocabularies, model and callbacks. The learning-rate
schedule is the library's `CosineToBudget`.
"""

import logging

import keras

from keras_attention.arguments.validation import check_positive_int
from keras_attention.training.losses import SmoothedSparseCrossentropy
from keras_attention.training.schedules import CosineToBudget
from keras_attention.training.schedules import check_max_minutes
from keras_attention.translation import distribute
from keras_attention.translation import runs
from keras_attention.translation.data import load_multi30k
from keras_attention.translation.model import ENCODER_LAYERS
from keras_attention.translation.model import build_translator
from keras_attention.translation.model import check_conditional
from keras_attention.translation.model import check_read_write_policy
from keras_attention.translation.pipeline import make_dataset
from keras_attention.translation.runs import CONFIG_FILE
from keras_attention.translation.runs import SOURCE_VOCAB
from keras_attention.translation.runs import TARGET_VOCAB
from keras_attention.translation.tokenizer import SubwordTokenizer

# Sizes of the two presets. "default" follows the published system (embedding
# 128, GRU 256); "tiny" is a first look that finishes in about two minutes.
PRESETS = {
    "default": {
        "embedding_dim": 128,
        "units": 256,
        # GRU size of each encoder direction; None: units / 2.
        "encoder_units": None,
        "dropout": 0.3,
        "batch_size": 64,
        "epochs": 30,
        "learning_rate": 2e-3,
        "max_train_examples": None,
        "vocab_size": 8000,
        # Smoothing (with tied embeddings) and tying measured better, the weight
        # average not: see "The recipe, and why" in docs/translation.md.
        "label_smoothing": 0.1,
        "ema_momentum": 0.0,
        "tie_embeddings": True,
        # The conditional GRU decoder (Bahdanau only) measured better: see
        # "The recipe, and why" in docs/translation.md.
        "conditional": True,
        # s_0 from the mean of the memory ("mean") measured better than from
        # the encoder's final states ("final"): see "The recipe, and why" in
        # docs/translation.md.
        "decoder_init": "mean",
    },
}
# The recipe of "default", at sizes that train in about two minutes.
PRESETS["tiny"] = dict(
    PRESETS["default"],
    embedding_dim=32,
    units=64,
    dropout=0.1,
    batch_size=32,
    epochs=2,
    learning_rate=3e-3,
    max_train_examples=1500,
    vocab_size=1000,
)
# Training pairs with a side longer than this many words are skipped (and
# counted in the log); evaluation splits are never filtered.
MAX_TRAIN_WORDS = 50
# The options that are positive integers (or None: the preset's).
INT_OPTIONS = (
    "embedding_dim",
    "units",
    "encoder_units",
    "batch_size",
    "epochs",
    "max_train_examples",
    "vocab_size",
)
# The options that are numbers in [low, high) (or None: the preset's).
FRACTION_OPTIONS = (
    ("dropout", 0.0, 1.0),
    ("label_smoothing", 0.0, 1.0),
    ("ema_momentum", 0.0, 1.0),
    ("learning_rate", 1e-12, float("inf")),
)
# Options of config.json that a resumed run may change: how it runs, not
# what it trains.
SESSION_OPTIONS = ("strategy", "replicas", "max_minutes")


def train_run(
    run_dir,
    *,
    data_dir=None,
    preset="default",
    attention="bahdanau",
    input_feeding=True,
    lr_schedule="cosine",
    patience=3,
    max_minutes=None,
    seed=0,
    keep_epochs=False,
    overwrite=False,
    strategy="one-device",
    mixed_precision=None,
    distribution=None,
    policy=None,
    wait_k=None,
    encoder_layers=None,
    **overrides,
):
    """Trains a translator into `run_dir`, or resumes its unfinished training.

    Args:
        run_dir: the run folder (created; `worker_N` in it for workers).
        data_dir: the Multi30k folder; None: as `load_multi30k` finds it.
        preset: a key of `PRESETS` (the sizes and the recipe).
        attention: one of `translation.model.ATTENTIONS`.
        input_feeding: Luong decoders only.
        lr_schedule: "cosine" (`CosineToBudget`: over the epochs or
            `max_minutes`) or "plateau" (halved when validation stalls).
        patience: epochs without a better validation loss before stopping.
        max_minutes: `TrainingRun.fit`'s time budget (the whole run's
            training minutes, across resumes); None: no budget.
        seed: the weights, the dropout and the shuffling.
        keep_epochs: also keep every epoch's weights (for `average`).
        overwrite: start a run of this package over (`TrainingRun`'s); a
            folder that is not a run of this package is never touched.
        strategy: one of `distribute.STRATEGIES` (`batch_size` per replica).
        mixed_precision: `TrainingRun`'s (a mixed policy).
        distribution: `TrainingRun`'s ("data-parallel" on JAX, one device).
        policy: None (the offline model), or a simultaneous read/write
            policy of `translation.model.POLICIES`: the streaming model of
            `build_translator` ("bahdanau" attention, no bridge).
        wait_k: "wait-k" only: k, or a pair (low, high) trained at once.
        encoder_layers: with a `policy`, the encoder's GRU layers (default
            `ENCODER_LAYERS`).
        **overrides: values of the preset's keys (`epochs=`, `units=`,
            `conditional=`, ...); None keeps the preset's value.

    Returns:
        The run folder (a `Path`).

    Raises:
        ValueError: an option is invalid, or two contradict each other.
        RunFolderError: the folder cannot hold this run (`TrainingRun`'s).
        CorruptRunError: it holds a damaged run, and not `overwrite`.
        NotADirectoryError: `run_dir` is a file.

    Nothing in the folder is changed when one of these is raised.
    """
    check_train_options(preset, attention, max_minutes, strategy, overrides, distribution)
    # The preset's decoder_init names the offline model's bridge; the
    # streaming model has none, so only an asked-for one is refused.
    check_read_write_policy(
        policy, attention, overrides.get("decoder_init"), wait_k, encoder_layers
    )
    tf_strategy = distribute.make_strategy(strategy)
    # Workers other than the chief write to a private sub-folder.
    run_dir = distribute.worker_run_dir(run_dir)
    config = _run_config(preset, overrides, attention=attention, seed=seed, preset=preset)
    config.update(_policy_config(policy, wait_k, encoder_layers))
    config.update(lr_schedule=lr_schedule, input_feeding=input_feeding)
    config.update(strategy=strategy, max_minutes=max_minutes)
    run = _open_run(run_dir, config, overwrite, tf_strategy, mixed_precision, distribution)
    with run:
        _train(run, tf_strategy, patience, max_minutes, keep_epochs, data_dir)
    return run_dir


def _run_config(preset_name, overrides, **options):
    """The preset's values, with the `overrides` that are not None and the
    `options`: what config.json records."""
    config = dict(PRESETS[preset_name])
    config.update((key, value) for key, value in overrides.items() if value is not None)
    config.update(options)
    # The presets' conditional decoder is a Bahdanau decoder; the others have none.
    config["conditional"] = config["conditional"] and config["attention"] == "bahdanau"
    return config


def _policy_config(policy, wait_k, encoder_layers):
    """The entries of a simultaneous `policy` in config.json: none for an
    offline run (None), whose config.json stays as before (and resumes and
    compares as before).

    Args:
        policy: None or one of `translation.model.POLICIES`.
        wait_k: `train_run`'s, k or a pair (low, high) (recorded as a list).
        encoder_layers: `train_run`'s; None is `ENCODER_LAYERS`.

    Returns:
        A dict: empty for `policy` None, else `policy`, `wait_k`,
        `encoder_layers` and `decoder_init` None (the streaming model has no
        bridge).
    """
    if policy is None:
        return {}
    return {
        "policy": policy,
        "wait_k": list(wait_k) if isinstance(wait_k, (tuple, list)) else wait_k,
        "encoder_layers": encoder_layers or ENCODER_LAYERS,
        "decoder_init": None,
    }


def _open_run(run_dir, config, overwrite, tf_strategy, mixed_precision, distribution):
    """The `TrainingRun` of `train_run` in `run_dir`, checked but not locked.

    Args:
        run_dir: the run folder (the worker's own for workers).
        config: what config.json records.
        overwrite: `train_run`'s.
        tf_strategy: the `tf.distribute` strategy the model is built under.
        mixed_precision: `TrainingRun`'s.
        distribution: `TrainingRun`'s.

    Returns:
        The run, its `options["replicas"]` set.

    Raises:
        RunFolderError: the folder cannot hold this run.
        CorruptRunError: it holds a damaged run, and not `overwrite`.
        NotADirectoryError: `run_dir` is a file.
    """
    run = runs.translator_run(
        run_dir,
        config,
        overwrite,
        ignore=SESSION_OPTIONS,
        setup=tf_strategy.scope,
        mixed_precision=mixed_precision,
        distribution=distribution,
    )
    # The batch is split across the strategy's replicas or the devices.
    run.options["replicas"] = run.options["devices"] or tf_strategy.num_replicas_in_sync
    # Read-only, before the lock file is written into the folder: a folder
    # that is not a run of ours is never written to. Checked again under the
    # lock.
    run.check()
    return run


def check_train_options(preset, attention, max_minutes, strategy, overrides, distribution=None):
    """Raises `ValueError` for an option of `train_run` that is invalid or
    contradicts another one."""
    if distribution is not None and strategy != "one-device":
        raise ValueError(
            f"Invalid value for argument `strategy`: a tf.distribute strategy cannot be "
            f"used with distribution={distribution!r} (keras.distribution on JAX). "
            f"Received: strategy={strategy!r}"
        )
    if preset not in PRESETS:
        raise ValueError(
            f"Invalid value for argument `preset`. Expected one of {sorted(PRESETS)}. "
            f"Received: preset={preset!r}"
        )
    unknown = sorted(set(overrides) - set(PRESETS[preset]))
    if unknown:
        raise ValueError(
            f"Invalid keyword arguments {unknown}. Expected the keys of a preset: "
            f"{sorted(PRESETS[preset])}."
        )
    for key in INT_OPTIONS:
        check_positive_int(key, overrides.get(key), allow_none=True)
    # Checked here, before the run folder is touched: the model would refuse
    # them only after config.json was written.
    for key, low, high in FRACTION_OPTIONS:
        value = overrides.get(key)
        if value is not None and not (
            isinstance(value, int | float) and not isinstance(value, bool) and low <= value < high
        ):
            raise ValueError(
                f"Invalid value for argument `{key}`. Expected a number in [{low}, {high}). "
                f"Received: {key}={value!r}"
            )
    # `TrainingRun.fit`'s check, here before the folder is touched.
    check_max_minutes(max_minutes)
    if max_minutes and strategy == "multi-worker":
        # Workers would stop after different epochs and wait on each other.
        raise ValueError(
            "Invalid value for argument `max_minutes`: it cannot be used with "
            f'strategy="multi-worker". Received: max_minutes={max_minutes!r}'
        )
    # The rule is the model's.
    check_conditional(attention, overrides.get("conditional"))


def _train(run, tf_strategy, patience, max_minutes, keep_epochs, data_dir):
    """The training of `train_run`, in a prepared and locked run folder."""
    run_dir, config = run.run_dir, run.options
    replicas = config["replicas"]
    seed = config["seed"]
    keras.utils.set_random_seed(seed)

    corpus = load_multi30k(("train", "val"), data_dir, max_words=None)
    train_split = corpus["train"]
    train_en, train_fr = filter_long_pairs(train_split.en, train_split.fr, MAX_TRAIN_WORDS)
    if config["max_train_examples"]:
        train_en = train_en[: config["max_train_examples"]]
        train_fr = train_fr[: config["max_train_examples"]]

    source_tokenizer, target_tokenizer = _tokenizers(run_dir, config, train_en, train_fr)
    run.write_config(
        source_vocab_size=source_tokenizer.vocab_size,
        target_vocab_size=target_tokenizer.vocab_size,
    )
    print(
        f"vocabularies: en {source_tokenizer.vocab_size}, fr "
        f"{target_tokenizer.vocab_size} subwords; {len(train_en)} training pairs"
    )

    # `batch_size` is per replica (or device); the datasets yield global
    # batches that the strategy (or the distribution) splits.
    global_batch = config["batch_size"] * replicas
    tokenizers = (source_tokenizer, target_tokenizer)
    # JAX compiles the step again for each new batch shape (a few seconds
    # each, dozens of shapes an epoch); TensorFlow traces one step for all
    # lengths, and its batches stay padded to their longest sentence, as
    # the recorded results were trained.
    fixed_shapes = keras.backend.backend() == "jax"
    common = {"batch_size": global_batch, "fixed_shapes": fixed_shapes}
    train_data = make_dataset(train_en, train_fr, *tokenizers, shuffle=True, seed=seed, **common)
    val = corpus["val"]
    val_data = make_dataset(val.en, val.fr, *tokenizers, shuffle=False, **common)
    train_data = distribute.shard_by_data(train_data)
    val_data = distribute.shard_by_data(val_data)
    # The run backs up, keeps model.keras the best on the validation loss,
    # resumes, and marks the run finished; built under the strategy's scope.
    run.fit(
        lambda: compiled_model(config, source_tokenizer, target_tokenizer, seed),
        train_data,
        validation_data=val_data,
        epochs=config["epochs"],
        callbacks=_callbacks(run, patience, max_minutes),
        max_minutes=max_minutes,
        keep_epochs=keep_epochs,
        # make_dataset shuffles; Keras warns at shuffle=True with a dataset.
        shuffle=False,
    )
    return run_dir


def _tokenizers(run_dir, config, train_en, train_fr):
    """The run's (source, target) tokenizers: read back, or learned and saved.

    The vocabularies come from the training split only, once per run: a
    resumed run reuses them. config.json is written after them, so they are
    whole when it exists.
    """
    if (run_dir / CONFIG_FILE).exists():
        runs.read_config(run_dir, required=())
        return (
            SubwordTokenizer.load(run_dir / SOURCE_VOCAB),
            SubwordTokenizer.load(run_dir / TARGET_VOCAB),
        )
    logging.info("Learning the WordPiece vocabularies from %d pairs", len(train_en))
    tokenizers = []
    for sentences, folder in ((train_en, SOURCE_VOCAB), (train_fr, TARGET_VOCAB)):
        tokenizer = SubwordTokenizer.build(
            sentences, vocab_size=config["vocab_size"], lower_case=True
        )
        tokenizer.save(run_dir / folder)
        tokenizers.append(tokenizer)
    return tuple(tokenizers)


def _callbacks(run, patience, max_minutes):
    """The callbacks of a training in the entered `run`, in their order,
    before the run's own (`EpochWeights`, `TimeLimit`, `RunKeeper`)."""
    config = run.options
    callbacks = []
    if config["ema_momentum"]:
        # Validation, the checkpoint and the backup see the averaged weights;
        # the next epoch trains the raw ones again. It must come first.
        callbacks.append(keras.callbacks.SwapEMAWeights(swap_on_epoch=True))
    callbacks += [
        keras.callbacks.TerminateOnNaN(raise_error=True),
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=patience),
        # The run's training time: a resumed run's rate goes on where it was.
        learning_rate_schedule(config, max_minutes, clock=run.training_time),
        keras.callbacks.TensorBoard(run.run_dir / runs.LOGS_DIR),
    ]
    # `TrainingRun.fit` adds the epoch weights after these (after the EMA
    # swap, like the checkpoint: the validated weights).
    return callbacks


def check_run_dir(run_dir, overwrite=False, config=None):
    """The checks of `train_run`'s run folder, which change nothing: returns
    its `RunStatus`, or None when `overwrite` is to start it over
    (`TrainingRun.check`)."""
    return runs.translator_run(run_dir, config, overwrite, ignore=SESSION_OPTIONS).check()


def prepare_run_dir(run_dir, overwrite=False, config=None):
    """Checks, locks and readies `run_dir` as `train_run` does, then releases
    it; returns the backup state to resume from, or None
    (`TrainingRun.__enter__`)."""
    with runs.translator_run(run_dir, config, overwrite, ignore=SESSION_OPTIONS) as run:
        return run.state


def compiled_model(config, source_tokenizer, target_tokenizer, seed=None):
    """`build_translator` for a run's config, compiled as `train_run` trains it:
    Adam with global norm clipping (and the weight average when
    `ema_momentum`), smoothed cross-entropy that ignores padding."""
    model = build_translator(
        source_tokenizer.vocab_size,
        target_tokenizer.vocab_size,
        attention=config["attention"],
        embedding_dim=config["embedding_dim"],
        units=config["units"],
        dropout=config["dropout"],
        input_feeding=config["input_feeding"],
        conditional=config["conditional"],
        decoder_init=config["decoder_init"],
        tie_embeddings=config["tie_embeddings"],
        encoder_units=config["encoder_units"],
        seed=seed,
        # Absent from an offline run's config.
        policy=config.get("policy"),
        wait_k=config.get("wait_k"),
        encoder_layers=config.get("encoder_layers"),
    )
    optimizer = keras.optimizers.Adam(
        config["learning_rate"],
        global_clipnorm=1.0,
        use_ema=bool(config["ema_momentum"]),
        ema_momentum=config["ema_momentum"],
    )
    model.compile(
        optimizer=optimizer,
        loss=SmoothedSparseCrossentropy(config["label_smoothing"], ignore_class=0),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    return model


def learning_rate_schedule(config, max_minutes=None, clock=None):
    """The callback of `config["lr_schedule"]`: `CosineToBudget` over the
    config's epochs and `max_minutes` on `clock` (a run's `training_time`),
    or "plateau" (`ReduceLROnPlateau`)."""
    if config["lr_schedule"] == "plateau":
        # Halve the rate after one epoch without a better validation loss.
        return keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=1)
    return CosineToBudget(config["learning_rate"], config["epochs"], max_minutes, clock=clock)


def filter_long_pairs(en, fr, max_words=MAX_TRAIN_WORDS):
    """The pairs whose sides both have at most `max_words` words, as two lists;
    logs how many were skipped."""
    kept = [
        (e, f)
        for e, f in zip(en, fr, strict=True)
        if max(len(e.split()), len(f.split())) <= max_words
    ]
    skipped = len(en) - len(kept)
    if skipped:
        logging.info("skipped %d training pairs longer than %d words", skipped, max_words)
    return [e for e, _ in kept], [f for _, f in kept]

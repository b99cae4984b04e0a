"""Training throughput of the decoders at an older revision and now, in one run.

A change to `keras_attention/decoders/` must keep the training speed. This
script times, in one process and in interleaved rounds (as
`decoder_speed.py` does), the same models built with the decoders of an older
revision (`--old`, any git revision) and with those of the working tree:
`BahdanauDecoder`, and `LuongDecoder` ("general") with and without input
feeding, beside the Keras reference of `decoder_speed.py`. Only the decoders
differ: the older ones are taken from git into a temporary copy of this
checkout's package, imported as `keras_attention_old`.

It prints the table of `decoder_speed.py` and, for each decoder, the ratio
new / old in every round, of tokens per wall second and per CPU second of the
process, after an untimed first round. On a shared machine wall times jump
between rounds; compare within a round, and prefer the CPU-time ratios. Nothing is written to
docs/benchmarks.md: this compares revisions, it does not publish a figure.

With `--also attention` (a comma-separated list of subpackages) those are
taken from the older revision too: the attention layers run inside every
decoder step, so a change there is timed the same way. `--also all` takes the
whole package of the older revision (for a revision whose modules lay
elsewhere).

With `--ops` it times nothing and compares, for each decoder, the operators
of its traced training step instead (forward and gradient, loop bodies
included, TensorFlow): a count that noise cannot move.

    python benchmarks/decoder_revisions.py --old HEAD~1
    python benchmarks/decoder_revisions.py --old v0.1.0 --steps 10 --rounds 5
    python benchmarks/decoder_revisions.py --old HEAD~1 --ops
    python benchmarks/decoder_revisions.py --old HEAD~1 --also attention

The options of `decoder_speed.py` (sizes, steps, rounds, `--jit on`) are
accepted. With `--steps 10 --rounds 5 --batch-size 32 --units 128
--embedding-dim 128 --vocab 2000 --source-length 12 --target-length 14` it
took about 5 minutes on a shared 2-core CPU; `--ops` under a minute.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OLD = "keras_attention_old"


def old_package(revision, into, folders=("decoders",)):
    """Copies this checkout's package into `into` as `keras_attention_old`,
    with each of `folders` (subpackages of `keras_attention/`) as it was at
    `revision`."""
    target = Path(into) / OLD
    whole = list(folders) == ["all"]  # a revision whose modules lay elsewhere
    if not whole:
        shutil.copytree(
            ROOT / "keras_attention", target, ignore=shutil.ignore_patterns("__pycache__")
        )
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision]
        + (["keras_attention"] if whole else [f"keras_attention/{f}" for f in folders]),
        check=True,
        capture_output=True,
    ).stdout
    extracted = Path(into) / "git"  # not on the path: no second `keras_attention`
    extracted.mkdir()
    subprocess.run(["tar", "-x", "-C", str(extracted)], input=archive, check=True)
    for folder in [] if whole else folders:
        shutil.rmtree(target / folder)
        shutil.move(extracted / "keras_attention" / folder, target / folder)
    if whole:
        shutil.move(extracted / "keras_attention", target)
    shutil.rmtree(extracted)
    # The copy imports itself, and registers its layers under its own name.
    for path in target.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("keras_attention", OLD), encoding="utf-8")
    return target


def builders(ds, old, new):
    """The models to time: the reference, then each decoder old and new."""

    def bahdanau(module):
        return lambda a: ds.decoder_model(
            a, module.BahdanauDecoder(a.units, module.BahdanauAttention(a.units))
        )

    def luong(module, feeding):
        return lambda a: ds.decoder_model(
            a,
            module.LuongDecoder(a.units, module.LuongAttention("general"), input_feeding=feeding),
        )

    models = {ds.REFERENCE: ds.MODELS[ds.REFERENCE]}
    for name, make in (
        ("BahdanauDecoder", bahdanau),
        ("LuongDecoder, input feeding", lambda m: luong(m, True)),
        ("LuongDecoder, no input feeding", lambda m: luong(m, False)),
    ):
        models[f"{name} (old)"] = make(old)
        models[f"{name} (new)"] = make(new)
    return models


def traced_ops(module, kind):
    """Operator counts of one traced training step of a small decoder of `module`."""
    import collections  # noqa: PLC0415

    import keras  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    keras.utils.set_random_seed(0)
    attention = {
        "bahdanau": lambda: module.BahdanauAttention(8),
        "luong": lambda: module.LuongAttention("general"),
        "location": lambda: module.LocationSensitiveAttention(units=4, filters=2, kernel_size=3),
    }
    decoders = {
        "BahdanauDecoder": lambda: module.BahdanauDecoder(8, attention["bahdanau"]()),
        "BahdanauDecoder, conditional LSTM": lambda: module.BahdanauDecoder(
            8, attention["bahdanau"](), cell_type="lstm", conditional=True
        ),
        "LuongDecoder, input feeding": lambda: module.LuongDecoder(8, attention["luong"]()),
        "LuongDecoder, no input feeding": lambda: module.LuongDecoder(
            8, attention["luong"](), input_feeding=False
        ),
        "LuongDecoder, location-sensitive": lambda: module.LuongDecoder(8, attention["location"]()),
    }
    decoder = decoders[kind]()
    y = tf.random.normal((2, 5, 6))  # (B, T_dec, d_emb)
    memory = tf.random.normal((2, 7, 8))  # (B, T_enc, d_h)
    mask = tf.sequence_mask([5, 3], 5)  # a padded target
    memory_mask = tf.sequence_mask([7, 4], 7)  # a padded source, as in training
    decoder(y, memory)

    @tf.function
    def train_step(y, memory):
        with tf.GradientTape() as tape:
            outputs, _, _ = decoder(
                y, memory, target_embeddings_mask=mask, memory_mask=memory_mask, training=True
            )
            loss = tf.reduce_sum(outputs)
        return tape.gradient(loss, decoder.trainable_variables)

    graph = train_step.get_concrete_function(y, memory).graph.as_graph_def()
    counts = collections.Counter(node.op for node in graph.node)
    for function in graph.library.function:  # the loop's bodies and gradients
        counts.update(node.op for node in function.node_def)
    return counts


OPS_KINDS = (
    "BahdanauDecoder",
    "BahdanauDecoder, conditional LSTM",
    "LuongDecoder, input feeding",
    "LuongDecoder, no input feeding",
    "LuongDecoder, location-sensitive",
)


def ops_lines(old, new):
    """Old and new operator counts of each decoder's training step, and what differs."""
    lines = []
    for kind in OPS_KINDS:
        a, b = traced_ops(old, kind), traced_ops(new, kind)
        differ = {op: (a[op], b[op]) for op in sorted(set(a) | set(b)) if a[op] != b[op]}
        what = ", ".join(f"{op} {x} → {y}" for op, (x, y) in differ.items()) or "none"
        lines.append(f"- {kind}: {sum(a.values())} ops old, {sum(b.values())} new; differ: {what}")
    return lines


def ratio_lines(speeds):
    """new / old of each decoder, every round, wall and CPU time."""
    lines = []
    for name in speeds:
        if not name.endswith(" (new)"):
            continue
        base = name[: -len(" (new)")]
        old, new = speeds[f"{base} (old)"], speeds[name]
        parts = []
        for clock in ("wall", "cpu"):
            ratios = [n / o for o, n in zip(old[clock], new[clock], strict=True)]
            rounds = ", ".join(f"{r:.2f}" for r in ratios)
            parts.append(f"{clock} {rounds} (median {statistics.median(ratios):.2f})")
        lines.append(f"- {base}, new / old: " + "; ".join(parts))
    return lines


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        print(
            "Options: --old REVISION (required), --also SUBPACKAGES, --ops, "
            "then those of decoder_speed.py."
        )
        return
    if "--old" not in argv or argv.index("--old") + 1 >= len(argv):
        sys.exit("decoder_revisions.py: --old REVISION is required (e.g. --old HEAD~1)")
    at = argv.index("--old")
    revision = argv[at + 1]
    rest = argv[:at] + argv[at + 2 :]
    folders = ["decoders"]
    if "--also" in rest:
        at = rest.index("--also")
        if at + 1 >= len(rest):
            sys.exit("decoder_revisions.py: --also needs subpackages (e.g. --also attention)")
        for folder in rest[at + 1].split(","):
            if folder == "all":  # the whole package of `revision`
                folders = ["all"]
                break
            if not (ROOT / "keras_attention" / folder).is_dir():
                sys.exit(
                    f"decoder_revisions.py: --also {folder}: no keras_attention/{folder}/ "
                    "in this checkout"
                )
            folders.append(folder)
        rest = rest[:at] + rest[at + 2 :]
    only_ops = "--ops" in rest
    rest = [a for a in rest if a != "--ops"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            old_package(revision, tmp, folders)
        except subprocess.CalledProcessError as error:
            sys.exit(f"decoder_revisions.py: git archive {revision}: {error.stderr.decode()}")
        sys.path.insert(0, tmp)
        sys.path.insert(0, str(HERE))
        import decoder_speed as ds  # noqa: PLC0415 (after the paths)
        import keras_attention_old as old  # noqa: PLC0415

        import keras_attention as new  # noqa: PLC0415

        if only_ops:
            taken = ", ".join(folders)
            print(f"operators of a traced training step, {taken} at {revision} (old) and now:")
            print("\n".join(ops_lines(old, new)))
            return
        args = ds.parse_args(rest + ["--no-write"])
        if args.jit == "both":
            sys.exit("decoder_revisions.py: --jit on or off (one table per run)")
        jit = args.jit == "on"
        taken = ", ".join(folders)
        print(f"{taken} at {revision} (old) and in the working tree (new)", flush=True)
        # One more round, untimed: each model's first `fit` over the timed
        # data ran up to 30 times slower here, the less so the later the
        # model was built, which would favour the last ones.
        args.rounds += 1
        speeds = ds.measure(args, builders(ds, old, new), jit)
        speeds = {
            name: {clock: values[1:] for clock, values in clocks.items()}
            for name, clocks in speeds.items()
        }
    print(ds.format_table({jit: speeds}, ds.REFERENCE))
    print("\n".join(ratio_lines(speeds)))


if __name__ == "__main__":
    main()

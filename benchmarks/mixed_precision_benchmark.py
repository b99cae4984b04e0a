"""Training throughput in mixed precision against float32, on TensorFlow and JAX;
and data-parallel training on 1, 2 and 4 JAX host devices.

Times `model.fit` steps (target tokens per second, padding not counted) of the
translator-sized model of benchmarks/decoder_speed.py: embedding 256, a
bidirectional GRU encoder of 128 per direction, `BahdanauDecoder(256,
BahdanauAttention(256))`, Dense over a vocabulary of 8,000; batch 64, source
16, target 18, random lengths from half to all of each, padded with 0. Adam,
sparse cross-entropy with `ignore_class=0`. Each backend runs in a process of
its own (`KERAS_BACKEND`); in it, each policy (`float32`, `mixed_float16`,
`mixed_bfloat16`) builds its model (`keras_attention.backend.precision.check_policy`
first: a policy the device cannot train in is reported, not timed), compiles
it, runs `--warmup` untimed steps (tracing, XLA compilation), then `--steps`
timed steps, in `--rounds` interleaved rounds; the median round is reported,
with its ratio to float32 of the same backend.

Mixed precision pays off on GPUs with tensor cores (float16 from compute
capability 7.0, bfloat16 from 8.0) and TPUs; on a CPU expect it slower than
float32. With the defaults a GPU run takes 2 to 4 minutes (mostly compiling);
on a 2-core CPU use `--tiny`:

    PYTHONPATH=. python benchmarks/mixed_precision_benchmark.py --write
    PYTHONPATH=. python benchmarks/mixed_precision_benchmark.py --tiny
    PYTHONPATH=. python benchmarks/mixed_precision_benchmark.py --data-parallel 1,2,4 --tiny

`--data-parallel 1,2,4` instead trains float32 on JAX under
`keras.distribution.DataParallel` over 1, 2 and 4 devices, each count in a
process of its own; on a machine without as many accelerators, host CPU
devices (`XLA_FLAGS=--xla_force_host_platform_device_count=N`), which share
the same cores: no speed-up is expected there, the point is that it runs and
that the losses agree (the first step's loss is in the table). The global
batch stays `--batch-size`.

Needs only keras, tensorflow (the data's ids, the report) and jax; run from
the repository root with `PYTHONPATH=.` or with the package installed. Prints
a table; `--write` records it in docs/benchmarks.md with the command, the
machine and the date.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SECTION = "Mixed precision training throughput"
DATA_PARALLEL_SECTION = "Data-parallel training on JAX devices"
BACKENDS = ("tensorflow", "jax")
POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
TINY = {"embedding_dim": 32, "units": 32, "vocab": 500, "batch_size": 16, "steps": 5}


# ------------------------------------------------------------ in one backend


def build_model(args):
    import keras

    from keras_attention import BahdanauAttention
    from keras_attention import BahdanauDecoder

    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    embedded = keras.layers.Embedding(args.vocab, args.embedding_dim, mask_zero=True)(source)
    memory, forward, backward = keras.layers.Bidirectional(
        keras.layers.GRU(args.units // 2, return_sequences=True, return_state=True)
    )(embedded)  # (B, S, units), (B, units / 2) twice
    state = keras.layers.Concatenate()([forward, backward])  # (B, units)
    target = keras.layers.Embedding(args.vocab, args.embedding_dim, mask_zero=True)(target_in)
    decoder = BahdanauDecoder(args.units, BahdanauAttention(args.units))
    outputs, _, _ = decoder(target, memory, initial_state=state)  # (B, T, units)
    # The logits in float32: the softmax of the loss should not run in float16.
    logits = keras.layers.Dense(args.vocab, dtype="float32")(outputs)  # (B, T, V)
    model = keras.Model([source, target_in], logits)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
    )
    return model


def random_data(args, steps):
    """`steps` batches of random ids, each row of a random length between half
    and all of the maximum, 0-padded; and the number of real target tokens."""
    import numpy as np

    rng = np.random.default_rng(args.seed)
    rows = args.batch_size * steps

    def padded(length):
        ids = rng.integers(3, args.vocab, size=(rows, length)).astype("int32")
        lengths = rng.integers(length // 2, length + 1, size=rows)
        ids[np.arange(length)[None, :] >= lengths[:, None]] = 0
        return ids

    source, target = padded(args.source_length), padded(args.target_length + 1)
    return [source, target[:, :-1]], target[:, 1:], int(np.count_nonzero(target[:, 1:]))


def timed_steps(model, args):
    """(tokens per second, tokens per CPU second) of `args.steps` steps, after
    `args.warmup` untimed ones. The CPU time is the process's, all its threads
    (on a CPU, the work done: a host that stalls its guests at a fixed rate
    moves the wall clock, not this; on a GPU, the host's side only)."""
    x, y, _ = random_data(args, args.warmup)
    model.fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0)
    x, y, tokens = random_data(args, args.steps)
    started, cpu_started = time.perf_counter(), time.process_time()
    model.fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0)
    cpu = time.process_time() - cpu_started
    return tokens / (time.perf_counter() - started), tokens / cpu


def first_step_loss(model, args):
    x, y, _ = random_data(args, 1)
    return float(model.evaluate(x, y, batch_size=args.batch_size, verbose=0))


def policies_worker(args):
    """{policy: {"speeds": [tokens/s per round]} or {"refused": reason}}."""
    import keras

    from keras_attention.backend import precision

    results, models = {}, {}
    for policy in args.policies:
        try:
            precision.check_policy(policy)
        except precision.PolicyError as error:
            results[policy] = {"refused": str(error)}
            continue
        keras.config.set_dtype_policy(policy)
        try:
            keras.utils.set_random_seed(args.seed)
            models[policy] = build_model(args)
        finally:
            keras.config.set_dtype_policy("float32")
        results[policy] = {"speeds": [], "cpu_speeds": []}
    for _ in range(args.rounds):  # interleaved: every policy once per round
        for policy, model in models.items():
            speed, cpu_speed = timed_steps(model, args)
            results[policy]["speeds"].append(speed)
            results[policy]["cpu_speeds"].append(cpu_speed)
            print(f"  {policy}: {speed:,.0f} tokens/s, {cpu_speed:,.0f} per CPU s", flush=True)
    return results


def data_parallel_worker(args):
    """{"devices": n, "speeds": [...], "loss": the first evaluation's loss}."""
    import keras

    from keras_attention.training import distribution

    devices = len(keras.distribution.list_devices())
    if args.batch_size % devices:
        raise SystemExit(f"--batch-size {args.batch_size} does not divide by {devices} devices")
    with distribution.data_parallel(devices).scope():
        keras.utils.set_random_seed(args.seed)
        model = build_model(args)
        loss = first_step_loss(model, args)
        speeds = []
        for _ in range(args.rounds):
            speeds.append(timed_steps(model, args)[0])
            print(f"  {devices} devices: {speeds[-1]:,.0f} tokens/s", flush=True)
    return {"devices": devices, "speeds": speeds, "loss": loss}


# ----------------------------------------------------------------- the driver


def run_worker(args, argv, backend, extra_env=None, mode="policies"):
    env = dict(os.environ, KERAS_BACKEND=backend, **(extra_env or {}))
    command = [sys.executable, os.path.abspath(__file__), *argv, "--worker", mode]
    completed = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True)
    lines = completed.stdout.strip().splitlines()
    for line in lines[:-1]:
        print(line)
    if completed.returncode != 0 or not lines:
        return {"failed": f"exit status {completed.returncode}"}
    return json.loads(lines[-1])


def forwarded(argv):
    """The options a worker gets: all but --write, --backends, --data-parallel."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--backends", "--data-parallel"):
            skip = True
        elif not (a == "--write" or a.startswith(("--backends=", "--data-parallel="))):
            out.append(a)
    return out


def policy_table(results):
    lines = [
        "| backend | policy | tokens/s (median) | rounds | × float32 "
        "| tokens per CPU s (median) | × float32 (CPU) |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for backend, by_policy in results.items():
        if "failed" in by_policy:
            lines.append(f"| {backend} | — | failed: {by_policy['failed']} | | | | |")
            continue
        base = by_policy.get("float32", {}).get("speeds")
        cpu_base = by_policy.get("float32", {}).get("cpu_speeds")
        for policy, result in by_policy.items():
            if "refused" in result:
                reason = result["refused"].split(". The runtime said")[0]
                lines.append(f"| {backend} | {policy} | refused: {reason} | | | | |")
                continue
            median = statistics.median(result["speeds"])
            rounds = ", ".join(f"{v:,.0f}" for v in result["speeds"])
            ratio = f"{median / statistics.median(base):.2f}×" if base else "—"
            cpu = statistics.median(result["cpu_speeds"])
            cpu_ratio = f"{cpu / statistics.median(cpu_base):.2f}×" if cpu_base else "—"
            lines.append(
                f"| {backend} | {policy} | {median:,.0f} | {rounds} | {ratio} "
                f"| {cpu:,.0f} | {cpu_ratio} |"
            )
    return "\n".join(lines)


def data_parallel_table(results):
    lines = [
        "| JAX devices | tokens/s (median) | rounds | × 1 device | loss of the first batch |",
        "|---:|---:|---|---:|---:|",
    ]
    base = None
    for count, result in results.items():
        if "failed" in result:
            lines.append(f"| {count} | failed: {result['failed']} | | | |")
            continue
        median = statistics.median(result["speeds"])
        base = base or median
        rounds = ", ".join(f"{v:,.0f}" for v in result["speeds"])
        lines.append(
            f"| {count} | {median:,.0f} | {rounds} | {median / base:.2f}× | {result['loss']:.6f} |"
        )
    return "\n".join(lines)


def sizes(args):
    return (
        f"Embedding {args.embedding_dim}, encoder a bidirectional GRU of {args.units // 2} "
        f"per direction, `BahdanauDecoder({args.units})`, vocabulary {args.vocab:,}, batch "
        f"{args.batch_size}, source {args.source_length}, target {args.target_length} "
        f"(random lengths, padding not counted); {args.warmup} untimed steps, then "
        f"{args.rounds} rounds of {args.steps} timed steps"
    )


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated")
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated")
    parser.add_argument(
        "--data-parallel",
        help="instead: float32 on JAX under DataParallel over these device counts, e.g. 1,2,4",
    )
    parser.add_argument("--tiny", action="store_true", help="small sizes, for a CPU check")
    parser.add_argument("--steps", type=int, default=30, help="timed steps a round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--source-length", type=int, default=16)
    parser.add_argument("--target-length", type=int, default=18)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--embedding-dim", type=int, default=256)
    parser.add_argument("--units", type=int, default=256, help="decoder state")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="record it in docs/benchmarks.md")
    parser.add_argument("--worker", choices=("policies", "data-parallel"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tiny:
        for name, value in TINY.items():
            if f"--{name.replace('_', '-')}" not in argv:
                setattr(args, name, value)
    args.policies = [p for p in args.policies.split(",") if p]
    unknown = sorted(set(args.policies) - set(POLICIES))
    if unknown:
        parser.error(f"unknown policies {unknown}; choose from {POLICIES}")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.worker:
        worker = policies_worker if args.worker == "policies" else data_parallel_worker
        print(json.dumps(worker(args)), flush=True)
        return 0
    started = time.perf_counter()
    if args.data_parallel:
        results = {}
        for count in (int(c) for c in args.data_parallel.split(",") if c):
            print(f"JAX, {count} devices", flush=True)
            env = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={count}"}
            results[count] = run_worker(args, forwarded(argv), "jax", env, "data-parallel")
        table, title = data_parallel_table(results), DATA_PARALLEL_SECTION
        what = (
            f"{sizes(args)}. Float32, `keras.distribution.DataParallel` over N devices "
            "(`keras_attention.training.distribution.data_parallel`), the same global batch; each "
            "count in a process of its own. Without as many accelerators the devices are "
            "host CPU devices (`XLA_FLAGS=--xla_force_host_platform_device_count=N`) "
            "sharing the same cores: no speed-up is expected, and the figures of a "
            "shared machine are indicative only; the loss column shows that the runs agree."
        )
    else:
        results = {}
        for backend in (b for b in args.backends.split(",") if b):
            print(f"backend {backend}", flush=True)
            results[backend] = run_worker(args, forwarded(argv), backend)
        table, title = policy_table(results), SECTION
        what = (
            f"{sizes(args)}. Each backend in a process of its own, the policies "
            "interleaved within it; the logits Dense in float32. A policy the device "
            "cannot train in (`keras_attention.backend.precision.check_policy`) is shown refused. "
            "Tokens per CPU s divides by the process's CPU time, all its threads: on a "
            "CPU the steadier measure where the host stalls its guests at a fixed rate; "
            "on a GPU it counts the host's side only."
        )
    wall = time.perf_counter() - started
    print()
    print(table)
    print(f"\nWall time: {wall:.0f} s")
    if args.write:
        import _report

        machine = _report.machine_description()
        if not args.data_parallel and "no GPU" in machine:
            # A CPU's figures beside an accelerator's, not in place of them.
            title = f"{SECTION} on a CPU"
        body = "\n\n".join(
            [
                f"Command: `{_report.command_line()}`  \n"
                f"Machine: {machine}; {_report.versions()}  \n"
                f"Date: {_report.today()}, revision {_report.git_revision()}; "
                f"wall time {wall:.0f} s.",
                what,
                table,
            ]
        )
        path = _report.write_section(title, body)
        print(f"Wrote the table to {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

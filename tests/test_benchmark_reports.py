"""The benchmark report writers: verdicts and stopping reasons read from run folders."""

import ast
import csv
import json
import os

import pytest
from _data_paths import require_cmudict
from _scripts import ROOT
from _scripts import load_script


@pytest.fixture(scope="module")
def translation_bar():
    return load_script("benchmarks/translation_bar.py")


def _run_folder(path, attention, val_losses, bleu, epochs=30, max_minutes=55):
    path.mkdir()
    config = {
        "attention": attention,
        "preset": "default",
        "embedding_dim": 128,
        "units": 256,
        "dropout": 0.3,
        "learning_rate": 2e-3,
        "batch_size": 64,
        "epochs": epochs,
        "source_vocab_size": 100,
        "target_vocab_size": 120,
        "max_minutes": max_minutes,
        "train_minutes_last_session": 54.5,
    }
    (path / "config.json").write_text(json.dumps(config))
    with open(path / "history.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["epoch", "val_loss"])
        writer.writeheader()
        for epoch, loss in enumerate(val_losses):
            writer.writerow({"epoch": epoch, "val_loss": loss})
    results = {}
    for split, score in bleu.items():
        for method in ("greedy", "beam"):
            results[f"{split}/{method}"] = {
                "bleu_lc_tok": score,
                "bleu": score - 1,
                "chrf": 60.0,
                "bleu_signature": "nrefs:1|case:mixed",
            }
    (path / "eval").mkdir()
    (path / "eval" / "results.json").write_text(json.dumps(results))
    return path


def test_verdicts_follow_the_targets(translation_bar, tmp_path):
    run = _run_folder(
        tmp_path / "att",
        "bahdanau",
        [3.0, 2.0, 1.5],
        {"test_2016_flickr": 59.0, "test_2017_flickr": 51.99},
    )
    base = _run_folder(tmp_path / "none", "none", [3.0, 2.5], {"test_2016_flickr": 20.0})
    report = translation_bar.build_report(run, base)
    assert "| bahdanau | test_2016_flickr | greedy | 59.0 |" in report
    assert "≥ 59.0: met" in report
    assert "≥ 52.0: not met" in report
    # The baseline is reported, never judged against the bar.
    baseline_rows = [r for r in report.splitlines() if r.startswith("| none (baseline) | test")]
    assert len(baseline_rows) == 2 and all(r.endswith("| — |") for r in baseline_rows)
    row = (
        "| bahdanau | 128 / 256 / 128 | 100 / 120 | 55 | 3 | 54.5 | 1.500 (epoch 3) "
        "| 0 / off | Dense |"
    )
    assert row in report
    assert "Beam: width 4, GNMT length penalty 0.6." in report


def test_conditional_decoder_is_named_and_judged(translation_bar, tmp_path):
    run = _run_folder(
        tmp_path / "att",
        "bahdanau",
        [3.0, 2.0],
        {"test_2016_flickr": 59.36, "test_2017_flickr": 51.84},
    )
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "conditional": True}))
    report = translation_bar.build_report(run)
    assert "| bahdanau (conditional decoder) | 128 / 256 / 128 |" in report
    name = "| bahdanau (conditional decoder) | test"
    rows = [r for r in report.splitlines() if r.startswith(name)]
    assert len(rows) == 4
    assert sum(r.endswith("≥ 59.0: met |") for r in rows) == 2
    assert sum(r.endswith("≥ 52.0: not met |") for r in rows) == 2


def test_mean_start_is_named(translation_bar, tmp_path):
    run = _run_folder(tmp_path / "att", "bahdanau", [3.0, 2.0], {"test_2016_flickr": 59.1})
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(
        json.dumps({**config, "conditional": True, "decoder_init": "mean"})
    )
    report = translation_bar.build_report(run)
    name = "| bahdanau (conditional decoder, s_0 from the mean of the memory) |"
    assert f"{name} 128 / 256 / 128 |" in report
    assert "| bahdanau (conditional decoder) |" not in report


def test_recipe_and_beam_settings_come_from_the_run(translation_bar, tmp_path):
    run = _run_folder(tmp_path / "att", "bahdanau", [3.0, 2.0], {"test_2016_flickr": 50.0})
    config = json.loads((run / "config.json").read_text())
    config.update(label_smoothing=0.1, ema_momentum=0.999, tie_embeddings=True, encoder_units=256)
    (run / "config.json").write_text(json.dumps(config))
    results = json.loads((run / "eval" / "results.json").read_text())
    results["test_2016_flickr/beam"].update(beam_width=8, length_penalty=1.0)
    (run / "eval" / "results.json").write_text(json.dumps(results))
    base = _run_folder(tmp_path / "none", "none", [3.0, 2.5], {"test_2016_flickr": 20.0})
    report = translation_bar.build_report(run, base)
    assert "| bahdanau | 128 / 256 / 256 |" in report
    assert "| none (baseline) | 128 / 256 / 128 |" in report
    assert "| 2.000 (epoch 2) | 0.1 / 0.999 | tied |" in report
    assert "| 2.500 (epoch 2) | 0 / off | Dense |" in report
    assert "compare their BLEU, not their validation losses" in report
    assert "Beam: width 8, GNMT length penalty 1." in report
    assert "width 4" not in report


def test_attention_sharpness_is_reported_when_explain_measured_it(translation_bar, tmp_path):
    run = _run_folder(tmp_path / "att", "bahdanau", [3.0, 2.0], {})
    explain = {
        "model's attention": {
            "tvd": 0.0,
            "bleu": 50.0,
            "bleu_lc_tok": 51.0,
            "sharpness": {"entropy": 0.39, "max_weight": 0.64, "on_last_token": 0.05, "steps": 9},
        },
        "uniform attention": {"tvd": 0.5, "bleu": 3.0, "bleu_lc_tok": 4.0},
    }
    (run / "explain.json").write_text(json.dumps(explain))
    report = translation_bar.build_report(run)
    assert "| uniform attention | 0.5 | 4.0 | 3.0 |" in report
    assert "over its 9 greedy steps: entropy / log(source tokens) 0.39" in report
    assert "on the last source token at 5.0% of the steps" in report


@pytest.mark.parametrize(
    "losses, epochs, expected",
    [
        ([3.0, 2.0, 1.5], 30, "stopped on its time budget after 3 epochs"),
        ([3.0, 1.0, 1.2, 1.3, 1.4], 30, "its best validation loss was at epoch 2"),
        ([3.0, 2.0, 1.5], 3, "trained all 3 epochs"),
    ],
)
def test_stopping_reason_is_read_from_the_history(
    translation_bar, tmp_path, losses, epochs, expected
):
    run = _run_folder(tmp_path / "att", "bahdanau", losses, {}, epochs=epochs)
    assert expected in translation_bar.build_report(run)


@pytest.mark.parametrize(
    "schedule, expected",
    [
        (None, "halved when the validation loss stops falling"),
        ("plateau", "halved when the validation loss stops falling"),
        ("cosine", "cosine decay to 5 % over the epochs or the time budget"),
    ],
)
def test_the_training_line_names_the_run_schedule(translation_bar, tmp_path, schedule, expected):
    run = _run_folder(tmp_path / "att", "bahdanau", [3.0, 2.0], {})
    if schedule is not None:
        config = json.loads((run / "config.json").read_text())
        config["lr_schedule"] = schedule
        (run / "config.json").write_text(json.dumps(config))
    report = translation_bar.build_report(run)
    assert expected in report
    other = "cosine decay" if expected.startswith("halved") else "halved when"
    assert other not in report


@pytest.fixture(scope="module")
def beam_settings():
    return load_script("benchmarks/beam_settings.py")


def test_beam_settings_always_include_greedy(beam_settings):
    assert beam_settings.settings([4, 8], [0.6, 1.0]) == [
        ("greedy", 1, None),
        ("beam", 4, 0.6),
        ("beam", 4, 1.0),
        ("beam", 8, 0.6),
        ("beam", 8, 1.0),
    ]
    with pytest.raises(ValueError, match="beam widths must be at least 2.*got 1"):
        beam_settings.settings([1], [0.6])


def test_beam_settings_report_names_a_run_of_its_own_section(beam_settings):
    row = {"method": "beam", "width": 4, "penalty": 1.0, "bleu_lc_tok": 58.3, "bleu": 56.5}
    row.update(chrf=72.9, seconds=10.0)
    tests = {"test_2016_flickr": {"bleu_lc_tok": 60.0, "bleu": 58.1, "chrf": 74.1}}
    config = {"attention": "bahdanau", "conditional": True, "decoder_init": "mean", "seed": 1}
    report = beam_settings.build_report(config, [row], row, tests, "val", 1014, "runs/x")
    assert report.startswith(
        "Run: `runs/x` (`bahdanau`, conditional decoder, s_0 from the mean of the memory, seed 1)."
    )
    assert "| beam 4, penalty 1 | 58.30 | 56.50 | 72.90 | 10 | yes |" in report
    assert "| test_2016_flickr | 60.00 | 58.10 | 74.10 |" in report
    bar = beam_settings.build_report(config, [row], row, tests, "val", 1014)
    assert bar.startswith("Run: the `bahdanau` model of the translation bar.")
    args = beam_settings.parse_args(["--section", "Beam settings: seed 1"])
    assert args.section == "Beam settings: seed 1"


def test_best_beam_setting_is_the_best_validation_bleu(beam_settings):
    rows = [{"bleu_lc_tok": 50.0}, {"bleu_lc_tok": 52.5}, {"bleu_lc_tok": 52.5}]
    assert beam_settings.best_setting(rows) is rows[1]  # first of a tie
    rows.append({"bleu_lc_tok": 52.6})
    assert beam_settings.best_setting(rows) is rows[3]
    with pytest.raises(ValueError, match="no settings"):
        beam_settings.best_setting([])


def test_beam_settings_refuses_to_choose_on_a_test_split(beam_settings, capsys):
    with pytest.raises(SystemExit):
        beam_settings.parse_args(["--val-split", "test_2016_flickr"])
    assert "is also a test split" in capsys.readouterr().err


def test_recipe_cost_ratios_are_to_plain_cross_entropy_in_the_same_run():
    bench = load_script("benchmarks/recipe_cost.py")
    names = list(bench.RECIPES)
    cpu = {names[0]: [2.0, 3.0, 2.0], names[1]: [3.0, 3.0, 3.0]}
    cpu.update({name: [2.0, 2.0, 2.0] for name in names[2:]})
    wall = {name: [1.0, 1.0, 1.0] for name in names}
    wall[names[1]] = [2.0, 2.0, 2.0]
    weights = {name: 2_000_000 for name in names}
    weights[names[-1]] = 1_500_000
    report = bench.report(cpu, wall, weights, steps=10, rounds=3)
    assert f"| {names[0]} | 2,000,000 | 0.200 | 1.00× | 2.00, 3.00, 2.00 | 1.00× |" in report
    assert f"| {names[1]} | 2,000,000 | 0.300 | 1.50× | 3.00, 3.00, 3.00 | 2.00× |" in report
    assert f"| {names[-1]} | 1,500,000 | 0.200 | 1.00× |" in report


def test_docs_plot_is_embedded_only_for_a_run_compared_with_the_baseline(translation_bar, tmp_path):
    run = _run_folder(tmp_path / "att", "bahdanau", [2.0], {"test_2016_flickr": 59.0})
    curves = {"bahdanau attention": [[1, 8, 174, 65.4], [9, 80, 826, 58.1]]}
    results = json.loads((run / "eval" / "results.json").read_text())
    results["test_2016_flickr/bleu_by_length"] = curves
    (run / "eval" / "results.json").write_text(json.dumps(results))
    alone = translation_bar.build_report(run)
    assert "| 1-8 | 174 | 65.4 |" in alone
    assert "img/bleu_by_length.png" not in alone  # the docs' plot is of another comparison
    assert "eval/bleu_by_length.test_2016_flickr.png" in alone
    both = dict(curves, **{"no attention": [[1, 8, 174, 35.0], [9, 80, 826, 20.0]]})
    (run / "eval_vs_none").mkdir()
    (run / "eval_vs_none" / "results.json").write_text(
        json.dumps({"test_2016_flickr/bleu_by_length": both})
    )
    compared = translation_bar.build_report(run)
    assert "| 1-8 | 174 | 65.4 | 35.0 |" in compared
    assert "![BLEU by source length, test_2016_flickr](img/bleu_by_length.png)" in compared


@pytest.fixture(scope="module")
def lesson():
    return load_script("benchmarks/g2p_attention_lesson.py")


def test_lesson_trains_each_attention_for_the_same_steps_then_scores_it(lesson, tmp_path):
    args = lesson.parse_args(["--epochs", "7", "--img-dir", str(tmp_path)])
    train, *scores = lesson.task_commands("monotonic", 2, "runs/x", args, ["ABC"])
    argv = train[0]
    assert argv[0] == "train" and argv[argv.index("--epochs") + 1] == "7"
    assert argv[argv.index("--steps-per-epoch") + 1] == "200"
    assert argv[argv.index("--seed") + 1] == "2"
    assert argv[argv.index("--learning-rate") + 1] == "2e-3"  # the recorded lesson's rate
    # The monotonic model is scored twice, soft then hard, each into its own file.
    assert [c for _, _, c in scores] == ["monotonic, decoded soft", "monotonic, decoded hard"]
    assert [out for _, out, _ in scores] == [
        "runs/x/eval_dev_soft.json",
        "runs/x/eval_dev_hard.json",
    ]
    plots = [argv[argv.index("--alignment-plot") + 1] for argv, _, _ in scores]
    assert plots == [
        str(tmp_path / "g2p_alignments_monotonic_soft.png"),
        str(tmp_path / "g2p_alignments_monotonic_hard.png"),
    ]
    # Later seeds draw no plot.
    _, (argv, _, column) = lesson.task_commands("luong-general", 1, "runs/y", args, None)
    assert column == "luong-general" and "--alignments" not in argv


def test_lesson_refuses_unknown_attentions_and_too_many_jobs(lesson, capsys):
    with pytest.raises(SystemExit):
        lesson.parse_args(["--kinds", "bahdanau,luong-dot"])
    assert "unknown luong-dot" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        lesson.parse_args(["--jobs", "999"])
    assert "cores" in capsys.readouterr().err


def test_lesson_jobs_run_pinned_to_one_core_with_one_thread(lesson, tmp_path, monkeypatch):
    # A stand-in for the example that reports where it ran.
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, sys\n"
        "print(sys.argv[1], sorted(os.sched_getaffinity(0)), "
        "os.environ.get('TF_NUM_INTRAOP_THREADS'), os.environ.get('TF_NUM_INTEROP_THREADS'))\n"
    )
    monkeypatch.setattr(lesson, "EXAMPLE", str(probe))
    cores = sorted(os.sched_getaffinity(0))
    jobs = min(2, len(cores))
    tasks = [
        (f"task {i}", [([f"t{i}a"], None, None), ([f"t{i}b"], None, None)], tmp_path / f"{i}.log")
        for i in range(3)
    ]
    lesson.run_tasks(tasks, jobs)
    for i in range(3):
        lines = (tmp_path / f"{i}.log").read_text().splitlines()
        assert [line.split()[0] for line in lines] == [f"t{i}a", f"t{i}b"]  # in order
        for line in lines:
            assert line.endswith("1 1")
            pinned = ast.literal_eval(line[line.index("[") : line.index("]") + 1])
            assert len(pinned) == 1 and pinned[0] in cores[:jobs]


def test_lesson_job_failure_names_its_log(lesson, tmp_path, monkeypatch):
    probe = tmp_path / "fail.py"
    probe.write_text("import sys\nprint('boom')\nsys.exit(3)\n")
    monkeypatch.setattr(lesson, "EXAMPLE", str(probe))
    log = tmp_path / "f.log"
    with pytest.raises(SystemExit, match=r"exit 3\); see .*f\.log"):
        lesson.run_tasks([("t", [(["train"], None, None)], log)], 1)
    assert "boom" in log.read_text()


def test_step_time_table_gives_medians_and_ratios_to_the_default():
    bench = load_script("benchmarks/g2p_step_time.py")
    names = list(bench.SETTINGS)[:2]

    def run(ms, cpu=300.0, first=20.0):
        return {"ms_per_step": ms, "cpu_ms_per_step": cpu, "first_pass_s": first}

    results = {names[0]: [run(200.0), run(210.0), run(400.0)], names[1]: [run(168.0)] * 3}
    table = bench.table(results, names)
    assert f"| {names[0]} | 210 (200, 210, 400) | 300 | 20 | 1.00× |" in table
    assert f"| {names[1]} | 168 (168, 168, 168) | 300 | 20 | 0.80× |" in table


@pytest.mark.tensorflow
def test_step_time_measures_the_recipe_model_on_real_batches():
    bench = load_script("benchmarks/g2p_step_time.py")
    data = ROOT.parent / "shared" / "data" / "cmudict"
    require_cmudict()
    out = bench.measure(str(data), 0, False, batches=2, passes=1)
    assert set(out) == {"first_pass_s", "ms_per_step", "cpu_ms_per_step"}
    assert out["ms_per_step"] > 0 and out["cpu_ms_per_step"] > 0 and out["first_pass_s"] > 0


def _g2p_run(path, seed, greedy, beam, epoch_seconds=(180.0, 170.0), **config):
    """A run folder of `examples/g2p_cmudict.py` as `train` and `evaluate` leave it."""
    path.mkdir()
    settings = {"attention": "location-sensitive", "learning_rate": 3e-3, "seed": seed}
    settings.update(config)
    settings.setdefault("quick", False)
    (path / "config.json").write_text(json.dumps(settings))
    epochs = [{"epoch": i + 1, "seconds": s} for i, s in enumerate(epoch_seconds)]
    progress = {"seconds": sum(epoch_seconds), "epochs": epochs}
    (path / "progress.json").write_text(json.dumps(progress))
    scores = {"split": "test", "file": "cmudict-0.7b.test", "words": 12}
    scores["greedy"] = {"wer": greedy[0], "per": greedy[1]}
    scores["beam 4"] = {"wer": beam[0], "per": beam[1]}
    (path / "eval_test.json").write_text(json.dumps(scores))
    return str(path)


def test_g2p_seeds_table_gives_each_seed_then_mean_and_range(tmp_path):
    bench = load_script("benchmarks/g2p_seeds.py")
    dirs = [
        _g2p_run(tmp_path / "s0", 0, (23.25, 5.43), (23.15, 5.39)),
        _g2p_run(tmp_path / "s1", 1, (23.0, 5.5), (22.7, 5.2), epoch_seconds=(150.0, 210.0)),
        _g2p_run(tmp_path / "s2", 2, (24.0, 5.6), (23.9, 5.5)),
    ]
    runs = [bench.read_run(d) for d in dirs]
    bench.check_same_recipe(runs)
    table = bench.table(runs)
    assert "| 1 | 2 | 6.0 | 150 to 210 | 23.00 / 22.70 | 5.50 / 5.20 |" in table
    # beam WER (23.15 + 22.7 + 23.9) / 3 = 23.25; PER (5.39 + 5.2 + 5.5) / 3 = 5.363
    assert "| mean (range), beam 4 | | | | 23.25 (22.70 to 23.90) | 5.36 (5.20 to 5.50) |" in table
    assert "| mean (range), greedy | | | | 23.42 (23.00 to 24.00) |" in table
    met, line = bench.verdict(runs)
    assert not met and "WER 23.25 > 23.0" in line and "PER 5.36 ≤ 5.4" in line


def test_g2p_seeds_target_needs_all_three_seeds_and_the_hour(tmp_path):
    bench = load_script("benchmarks/g2p_seeds.py")
    good = [
        bench.read_run(_g2p_run(tmp_path / f"s{i}", i, (23.0, 5.4), (22.9, 5.3))) for i in range(3)
    ]
    assert bench.verdict(good)[0]
    assert not bench.verdict(good[:2])[0]
    assert "2 of the 3 seeds" in bench.verdict(good[:2])[1]
    slow = _g2p_run(tmp_path / "slow", 3, (23.0, 5.4), (22.9, 5.3), epoch_seconds=(1900.0, 1800))
    met, line = bench.verdict(good[:2] + [bench.read_run(slow)])
    assert not met and "61.7 minutes of training > 60" in line


def test_g2p_seeds_refuses_runs_of_different_recipes_naming_the_setting(tmp_path):
    bench = load_script("benchmarks/g2p_seeds.py")
    a = bench.read_run(_g2p_run(tmp_path / "a", 0, (23.0, 5.4), (22.9, 5.3)))
    b = bench.read_run(_g2p_run(tmp_path / "b", 1, (23.0, 5.4), (22.9, 5.3), learning_rate=2e-3))
    with pytest.raises(SystemExit, match=r"learning_rate is 0.003 in .*a and 0.002 in .*b"):
        bench.check_same_recipe([a, b])
    twice = bench.read_run(_g2p_run(tmp_path / "c", 0, (23.0, 5.4), (22.9, 5.3)))
    with pytest.raises(SystemExit, match=r"a seed appears twice: \[0, 0\]"):
        bench.check_same_recipe([a, twice])


def test_g2p_seeds_names_a_missing_score_file_and_the_command_that_writes_it(tmp_path):
    bench = load_script("benchmarks/g2p_seeds.py")
    run = _g2p_run(tmp_path / "a", 0, (23.0, 5.4), (22.9, 5.3))
    os.remove(os.path.join(run, "eval_test.json"))
    with pytest.raises(SystemExit, match=r"eval_test\.json: not found \(`evaluate --split test`"):
        bench.read_run(run)
    quick = _g2p_run(tmp_path / "q", 0, (23.0, 5.4), (22.9, 5.3), quick=True)
    with pytest.raises(SystemExit, match="--quick run"):
        bench.read_run(quick)


@pytest.mark.tensorflow
def test_float16_benchmark_counts_the_loop_values_of_each_variant(capsys):
    bench = load_script("benchmarks/float16_export_benchmark.py")
    argv = ["--vocab", "300", "--embedding", "16", "--units", "32", "--source-length", "12"]
    assert bench.main([*argv, "--words", "5", "--repeats", "1"]) == 0
    rows = {
        line.split(" | ")[0].lstrip("| "): line.split(" | ")
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| float")
    }
    assert list(rows) == list(bench.VARIANTS)
    carried = {name: row[1] for name, row in rows.items()}
    # The package's float16 loops carry what float32 loops carry; the
    # converter's option (TensorFlow 2.21) carries weights besides.
    assert carried["float16, this package"] == carried["float32"]
    greedy, beam = (int(v) for v in carried["float32"].split(" / "))
    theirs = [int(v) for v in carried["float16, converter's option"].split(" / ")]
    assert theirs[0] >= greedy and theirs[1] >= beam and greedy >= 8


def test_g2p_seeds_reports_the_ensemble_of_exactly_these_runs(tmp_path):
    bench = load_script("benchmarks/g2p_seeds.py")
    dirs = [_g2p_run(tmp_path / f"s{i}", i, (23.0, 5.4), (22.9, 5.3)) for i in range(3)]
    runs = [bench.read_run(d) for d in dirs]
    assert bench.read_ensemble(runs) is None  # not evaluated yet
    scores = {"runs": dirs, "greedy": {"wer": 21.5, "per": 4.9}}
    scores["beam 4"] = {"wer": 20.96, "per": 4.8}
    path = os.path.join(dirs[0], "eval_test_ensemble3.json")
    with open(path, "w") as f:
        json.dump(scores, f)
    ensemble = bench.read_ensemble(runs)
    assert ensemble["beam"] == (20.96, 4.8) and ensemble["minutes"] == pytest.approx(17.5)
    text = " ".join(bench.ensemble_lines(runs, ensemble))
    assert "beam 4 20.96 / 4.80" in text and "18 minutes of training in all" in text
    assert "(WER ≤ 21.0): met" in text
    scores["runs"] = dirs[:2] + [str(tmp_path / "elsewhere")]
    with open(path, "w") as f:
        json.dump(scores, f)
    with pytest.raises(SystemExit, match="not of these runs"):
        bench.read_ensemble(runs)


def test_mixed_precision_tokens_compares_with_a_float32_build_of_the_same_weights(
    tmp_path, monkeypatch
):
    import keras
    import numpy as np

    bench = load_script("benchmarks/mixed_precision_tokens.py")
    g2p = load_script("examples/g2p_cmudict.py")
    assert bench.spaced(list("abcdefghij"), 4) == ["a", "c", "f", "h"]
    assert bench.spaced(list("abc"), 0) == bench.spaced(list("abc"), 9) == ["a", "b", "c"]
    vocab = g2p.Vocabulary(["<pad>", "A", "B", "C"], [*g2p.PHONE_SPECIALS, "AH", "B"])
    config = {"attention": "bahdanau", "embedding_dim": 4, "encoder_units": 4}
    config.update(encoder_layers=1, units=6, dropout=0.0, seed=0)
    config.update(sigmoid_noise=1.0, score_bias_init=-1.0)
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = g2p.build_model(len(vocab.graphemes), len(vocab.phones), **config)
    finally:
        keras.config.set_dtype_policy("float32")
    reference = bench.float32_reference(g2p, model, vocab, config)
    assert {layer.dtype_policy.name for layer in reference.layers} == {"float32"}
    assert {layer.dtype_policy.name for layer in model.layers} == {"mixed_bfloat16"}
    for got, want in zip(reference.weights, model.weights, strict=True):
        np.testing.assert_array_equal(got, want, err_msg=want.path)
    inputs = [np.array([[1, 2, 3]], "int32"), np.array([[1, 3, 4]], "int32")]
    # The same function: the outputs differ by bfloat16's rounding only.
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(reference(inputs)),
        keras.ops.convert_to_numpy(model(inputs)).astype("float32"),
        atol=0.05,
    )
    # A run trained in float32 is refused before anything is computed.
    monkeypatch.setattr(g2p, "load_run", lambda run_dir: (None, None, {"mixed_precision": None}))
    monkeypatch.setattr(bench._report, "load_g2p_example", lambda: g2p)
    with pytest.raises(SystemExit, match="trained in float32: train with --mixed-precision"):
        bench.main(["--run-dir", str(tmp_path)])

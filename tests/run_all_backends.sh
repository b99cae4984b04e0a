#!/usr/bin/env bash
# Runs the tests on the three Keras backends:
#
#   bash tests/run_all_backends.sh python -m pytest -q [PYTEST_OPTIONS...]
#
# - the whole suite on TensorFlow, with the pytest command given (default
#   `python -m pytest -q`), but for the modules in SECOND_CORE_TENSORFLOW;
# - at the same time, on PyTorch then on JAX, the modules below: the layers,
#   the decoders, saving and generation, whose float64 references do not
#   depend on the backend (tests marked `tensorflow` skip there). JAX runs
#   all but the three listed in JAX_SKIPS, and of those three the tests in
#   JAX_SELECTED: called eagerly, each decoder or layer loop is compiled
#   again at every call, and the rest of those modules (property tests over
#   many shapes, every cell kind against every check) took about 15 minutes
#   more there before the compilation cache below. They run on TensorFlow
#   and PyTorch;
# - then, still beside the first run, SECOND_CORE_TENSORFLOW on TensorFlow
#   with `python -m pytest -q`: modules that train (in their own processes,
#   or the G2P page's quick model), moved so that the two runs take about
#   the same time.
#
# The TensorFlow run uses about one core (most of its time is Python, not
# kernels), so the other runs go beside it, on the second core of a 2-core
# machine. Their output is printed after the TensorFlow run's. The exit
# status is 0 only when every run passed.
set -uo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3}
# Tests compile far more than they compute: XLA's CPU optimization level 0
# compiles about twice as fast (every JAX test, TensorFlow's jit_compile
# tests, and the processes they start, which keep these flags). Measured:
# tests/test_decoders.py and tests/test_seq2seq_generator.py on JAX took
# 199 s of CPU time against 282 s at the default level, with the same results.
export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_backend_optimization_level=0"

EVERY_BACKEND=(
    tests/test_bahdanau_attention.py
    tests/test_luong_attention.py
    tests/test_masked_softmax.py
    tests/test_shape_errors.py
    tests/test_layer_properties.py
    tests/test_alignment_attention.py
    tests/test_decoders.py
    tests/test_decoder_cells.py
    tests/test_stateful_decoders.py
    tests/test_layer_saving.py
    tests/test_decoder_saving.py
    tests/test_hostile_inputs.py
    tests/test_ops_search.py
    tests/test_seq2seq_generator.py
    tests/test_gmm_attention.py
    tests/test_custom_attention.py
    tests/test_call_state.py
    tests/test_attention_door.py
    # A user's own model in a crash-safe run (keras_attention.training).
    tests/test_training_run.py
    tests/test_contract_checker.py
    tests/test_output_length.py
    # Trainer helpers and the time budget; several generators as one.
    tests/test_training_helpers.py
    tests/test_time_budget.py
    tests/test_ensemble.py
    # Simultaneous decoding: the read/write policies and the stream.
    tests/test_wait_k_attention.py
    tests/test_monotonic_infinite_lookback.py
    tests/test_simultaneous_generator.py
)

JAX_SKIPS=(
    tests/test_layer_properties.py
    tests/test_alignment_attention.py
    tests/test_decoder_cells.py
    tests/test_custom_attention.py
    tests/test_contract_checker.py
    tests/test_ensemble.py
    tests/test_wait_k_attention.py
    tests/test_monotonic_infinite_lookback.py
    tests/test_simultaneous_generator.py
)
# ...of which JAX still runs these: the float64 references of the alignment
# layers, their monotonic laws and saving; any cell against the fused path
# and teacher forcing, compiled with XLA, saved.
JAX_SELECTED=(
    # The policies and the stream, each behaviour once: k drawn per row
    # before the loop (no tracer leaks from a scan), MILk against its float64
    # reference and step by step, the stream equal to offline greedy.
    "tests/test_wait_k_attention.py::test_a_decoder_in_training_draws_k_per_row_before_its_loop[bahdanau]"
    tests/test_wait_k_attention.py::test_a_model_with_training_k_fits
    "tests/test_wait_k_attention.py::test_decoder_call_equals_its_step_loop[luong]"
    "tests/test_monotonic_infinite_lookback.py::test_soft_weights_equal_the_papers_sum[3-4-6-parallel-False]"
    "tests/test_monotonic_infinite_lookback.py::test_step_by_step_decoding_equals_the_teacher_forced_call[bahdanau-hard]"
    "tests/test_simultaneous_generator.py::test_wait_k_streaming_gives_the_offline_tokens_on_its_schedule[3-bahdanau]"
    tests/test_alignment_attention.py::test_sequence_matches_reference
    tests/test_alignment_attention.py::test_single_step_from_previous_state_matches_reference
    tests/test_alignment_attention.py::test_monotonic_alignment_function_matches_reference
    tests/test_alignment_attention.py::test_parallel_layer_equals_recursive_layer_in_float32
    tests/test_alignment_attention.py::test_hard_mode_weights_never_move_backwards
    tests/test_alignment_attention.py::test_keras_file_round_trip_after_clear_session
    tests/test_decoder_cells.py::test_fused_fast_path_equals_the_generic_cell_path
    tests/test_decoder_cells.py::test_step_by_step_decoding_equals_teacher_forced_call
    tests/test_decoder_cells.py::test_the_last_layer_of_a_stack_queries_the_attention
    tests/test_decoder_cells.py::test_model_with_a_cell_fits_compiled_with_xla
    tests/test_decoder_cells.py::test_keras_file_round_trip_gives_identical_outputs
    # GMM attention, a state of one's own: each behaviour once, in one
    # decoder, and the page's two classes (with test_gmm_attention.py, 45 s of
    # CPU time on JAX here).
    "tests/test_custom_attention.py::test_teacher_forced_call_equals_step_by_step_decoding[luong_stacked]"
    "tests/test_custom_attention.py::test_the_windows_move_forward_at_every_step[bahdanau]"
    "tests/test_custom_attention.py::test_greedy_equals_an_argmax_loop_over_the_decoder_step[luong_stacked]"
    "tests/test_custom_attention.py::test_beam_hypotheses_score_their_tokens_as_the_model_does[bahdanau]"
    "tests/test_custom_attention.py::test_fit_reduces_the_loss_on_a_copy_task[bahdanau]"
    "tests/test_custom_attention.py::test_keras_file_round_trip_gives_identical_outputs[luong_stacked]"
    tests/test_custom_attention.py::test_the_pages_mechanism_equals_gmm_attention
    tests/test_custom_attention.py::test_the_pages_noisy_mechanism_draws_before_the_loop_and_trains
    "tests/test_custom_attention.py::test_a_mechanism_that_forgets_the_mask_puts_no_weight_on_padding[luong]"
    # A draw inside a step is an error at trace time: eagerly, and in the
    # compiled fit (XLA), for each kind of draw (6 tests, 5 s on JAX).
    "tests/test_custom_attention.py::test_a_random_draw_in_step_weights_is_an_error_when_the_layer_is_built"
    "tests/test_custom_attention.py::test_a_random_draw_in_step_weights_in_training_is_an_error_in_fit"
    tests/test_custom_attention.py::test_a_weight_of_the_wrong_shape_names_build_score_and_the_expected_size
    # The contract checker: eager decoder loops on JAX compile at every call
    # (45 to 65 s a shipped mechanism, 570 s the module); one mechanism, two
    # breaches and the skipped TFLite promise.
    "tests/test_contract_checker.py::test_every_shipped_mechanism_keeps_every_promise[luong_dot]"
    "tests/test_contract_checker.py::test_a_broken_promise_is_named_with_its_method[zero weight at masked keys]"
    "tests/test_contract_checker.py::test_a_broken_promise_is_named_with_its_method[no random draw inside a step]"
    tests/test_contract_checker.py::test_the_tflite_promise_is_skipped_with_its_reason_off_tensorflow
    # The ensemble (169 s on JAX, the module): its mean, greedy.
    tests/test_ensemble.py::test_greedy_takes_the_best_mean_probability_at_every_step
)

# About 150 s: nine training processes, each killed inside a write; about
# 90 s: the G2P page in Chromium (a quick training, an export, the browser);
# about 130 s: the translator example's commands; about 55 s: the
# translation page in Chromium; 190 s on a busy machine: the main job's output (train,
# evaluate, export in their own processes); 210 s on a busy machine: a tiny translator
# trained in mixed_bfloat16 and exported; 40 s the G2P quick run so, 155 s its runs on
# 1 and 3 JAX host devices; about 80 s: a model saved on each backend and
# loaded on each other one, in their own processes. (Alone on a 2-core machine, with
# XLA's level 0 above, the first run took 22 minutes, the other core's runs 21
# minutes: PyTorch 2, JAX 9, this list 10; .ci/run 26.5 minutes in all.)
SECOND_CORE_TENSORFLOW=(
    tests/test_kill_resume.py
    tests/test_training_run_kill.py
    tests/test_browser_g2p.py
    tests/test_translate_example.py
    tests/test_browser.py
    tests/test_quiet_output.py
    tests/test_training_options.py
    tests/test_cross_backend_saving.py
)
ignored=()
for module in "${SECOND_CORE_TENSORFLOW[@]}"; do ignored+=("--ignore=$module"); done

logs=$(mktemp -d)
(
    for backend in torch jax tensorflow; do
        started=$SECONDS
        case "$backend" in
            torch) modules=("${EVERY_BACKEND[@]}") ;;
            jax)
                modules=()
                for module in "${EVERY_BACKEND[@]}"; do
                    case " ${JAX_SKIPS[*]} " in *" $module "*) ;; *) modules+=("$module") ;; esac
                done
                modules+=("${JAX_SELECTED[@]}")
                ;;
            tensorflow) modules=("${SECOND_CORE_TENSORFLOW[@]}") ;;
        esac
        echo "${#modules[@]}" >"$logs/$backend.modules"  # modules or tests
        # JAX compiles the same loop again at every eager call; its persistent
        # cache, fresh for this run, turns the repeats into lookups.
        JAX_COMPILATION_CACHE_DIR=$logs/jax_cache \
            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 \
            JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0 \
            KERAS_BACKEND=$backend python -m pytest -q -p no:cacheprovider "${modules[@]}" \
            >"$logs/$backend.txt" 2>&1
        echo $? >"$logs/$backend.status"
        echo $((SECONDS - started)) >"$logs/$backend.seconds"
    done
) &
others=$!

echo "== KERAS_BACKEND=tensorflow: the whole suite but ${SECOND_CORE_TENSORFLOW[*]}" \
    "(PyTorch, JAX and that run beside it)"
if [ "$#" -eq 0 ]; then set -- python -m pytest -q; fi
KERAS_BACKEND=tensorflow "$@" "${ignored[@]}"
status=$?
wait "$others"

for backend in torch jax tensorflow; do
    code=$(cat "$logs/$backend.status")
    echo
    if [ "$backend" = tensorflow ]; then
        echo "== KERAS_BACKEND=tensorflow: ${SECOND_CORE_TENSORFLOW[*]}, $(cat "$logs/$backend.seconds") s"
    else
        echo "== KERAS_BACKEND=$backend: $(cat "$logs/$backend.modules") modules or tests, $(cat "$logs/$backend.seconds") s"
    fi
    if [ "$code" -eq 0 ]; then
        tail -n 1 "$logs/$backend.txt"
    else
        cat "$logs/$backend.txt"
        status=1
    fi
done
rm -rf "$logs"
exit "$status"

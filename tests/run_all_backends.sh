#!/usr/bin/env bash
# Runs the tests on the three Keras backends:
#
#   bash tests/run_all_backends.sh python -m pytest -q [PYTEST_OPTIONS...]
#
# - the whole suite on TensorFlow, with the pytest command given (default
#   `python -m pytest -q`);
# - at the same time, on PyTorch then on JAX, the modules below: the layers,
#   the decoders, saving and generation, whose float64 references do not
#   depend on the backend (tests marked `tensorflow` skip there). JAX runs
#   all but the three listed in JAX_SKIPS: called eagerly, each decoder or
#   layer loop is compiled again at every call, and those three (property
#   tests over many shapes, every cell kind) would take about 15 minutes
#   more there. They run on TensorFlow and PyTorch.
#
# The TensorFlow run uses about one core (most of its time is Python, not
# kernels), so the other backends run beside it, on the second core of a
# 2-core machine. Their output is printed after the TensorFlow run's. The
# exit status is 0 only when every run passed.
set -uo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3}

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
)

JAX_SKIPS=(
    tests/test_layer_properties.py
    tests/test_alignment_attention.py
    tests/test_decoder_cells.py
)

logs=$(mktemp -d)
(
    for backend in torch jax; do
        started=$SECONDS
        modules=("${EVERY_BACKEND[@]}")
        if [ "$backend" = jax ]; then
            modules=()
            for module in "${EVERY_BACKEND[@]}"; do
                case " ${JAX_SKIPS[*]} " in *" $module "*) ;; *) modules+=("$module") ;; esac
            done
        fi
        echo "${#modules[@]}" >"$logs/$backend.modules"
        KERAS_BACKEND=$backend python -m pytest -q -p no:cacheprovider "${modules[@]}" \
            >"$logs/$backend.txt" 2>&1
        echo $? >"$logs/$backend.status"
        echo $((SECONDS - started)) >"$logs/$backend.seconds"
    done
) &
others=$!

echo "== KERAS_BACKEND=tensorflow: the whole suite (PyTorch and JAX run beside it)"
if [ "$#" -eq 0 ]; then set -- python -m pytest -q; fi
KERAS_BACKEND=tensorflow "$@"
status=$?
wait "$others"

for backend in torch jax; do
    code=$(cat "$logs/$backend.status")
    echo
    echo "== KERAS_BACKEND=$backend: $(cat "$logs/$backend.modules") modules, $(cat "$logs/$backend.seconds") s"
    if [ "$code" -eq 0 ]; then
        tail -n 1 "$logs/$backend.txt"
    else
        cat "$logs/$backend.txt"
        status=1
    fi
done
rm -rf "$logs"
exit "$status"

#!/usr/bin/env bash
# The main job: train the English-French translator, evaluate it, export it.
#
#   bash examples/run_translator.sh [DATA_DIR] [RUN_DIR]
#
# DATA_DIR holds the Multi30k .gz files (default ../shared/data/multi30k; when
# it does not exist the files are downloaded into the Keras cache). About an
# hour of training on a 2-core CPU; a killed run resumes where it stopped when
# started again with the same RUN_DIR, and a finished one is not trained again.
set -euo pipefail
# The translator's command line (the commands of examples/translate_en_fr.py).
TRANSLATOR=(python -m keras_attention.translation)
DATA_DIR=${1:-../shared/data/multi30k}
RUN_DIR=${2:-runs/bahdanau}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3}
DATA=()
if [ -d "$DATA_DIR" ]; then DATA=(--data-dir "$DATA_DIR"); fi

# A run is finished once train has written RUN_DIR/finished.json, last; any
# other folder (killed at any point, even while writing a file) resumes.
if "${TRANSLATOR[@]}" status --run-dir "$RUN_DIR" | grep -q '^finished:'; then
    echo "$RUN_DIR holds a finished run: evaluating and exporting it"
else
    "${TRANSLATOR[@]}" "${DATA[@]}" train --attention bahdanau \
        --run-dir "$RUN_DIR" --max-minutes 55
fi
"${TRANSLATOR[@]}" "${DATA[@]}" evaluate --run-dir "$RUN_DIR"
"${TRANSLATOR[@]}" "${DATA[@]}" explain --run-dir "$RUN_DIR"
"${TRANSLATOR[@]}" export "$RUN_DIR" "$RUN_DIR/export"
"${TRANSLATOR[@]}" translate --run-dir "$RUN_DIR" \
    "A man in a blue shirt is standing on a ladder." \
    "Two young girls are playing in the sand."

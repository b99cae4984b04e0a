"""`backend.native_log`: TensorFlow's C++ start-up lines stay off the
package's commands' standard error; everything else passes, and a user's own
process is never touched."""

import os
import re
import subprocess
import sys

import pytest

from keras_attention.backend import native_log

# A line of absl's C++ log (severity, date, time, thread, file:line]), as
# TensorFlow, XLA and the CUDA probe write them: written here independently of
# `native_log.NOISE`.
ABSL_LINE = re.compile(r"^[IWEF]\d{4} \S+\s+\d+ \S+:\d+\]")
# Lines TensorFlow 2.21 wrote at start-up on a CPU-only machine.
STARTUP = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796659522.244892   16803 port.cc:153] oneDNN custom operations are on.",
    "I0000 00:00:1796659522.254989   16803 cudart_stub.cc:31] Could not find cuda drivers",
    "I0000 00:00:1796659522.422918   16803 cpu_feature_guard.cc:227] This TensorFlow binary",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, "
    "rebuild TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1796659533.642130   16803 cuda_platform.cc:52] failed call to cuInit: INTERNAL",
    "W0000 00:00:1796659533.642130   16803 gpu_device.cc:2342] Cannot dlopen some GPU libraries.",
    "2026-12-07 17:58:51.178950: I external/local_tsl/tsl/cuda/cudart_stub.cc:32] Could not "
    "find cuda drivers on your machine, GPU will not be used.",
    "2026-12-07 17:58:51.189055: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:479] "
    "Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT",
    "2026-12-07 17:58:52.108206: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] "
    "TF-TRT Warning: Could not find TensorRT",
    "E0000 00:00:1796660376.826093   22105 util.cc:131] oneDNN supports DT_INT64 only on "
    "platforms with AVX-512. Falling back to the default Eigen-based implementation if present.",
]
KEPT = [
    "E0000 00:00:1796659533.642130   16803 tflite.cc:12] Failed to convert: op MatMul",
    "2026-12-07 17:58:51.189055: E tensorflow/lite/convert.cc:12] Failed to convert: op MatMul",
    "Traceback (most recent call last):",
    "UserWarning: a real warning",
    "train: epoch 1 of 40, loss 3.21",
    "",
]


@pytest.mark.parametrize("line", STARTUP)
def test_tensorflows_startup_lines_are_noise(line):
    assert native_log.is_noise(line)


@pytest.mark.parametrize("line", KEPT)
def test_errors_warnings_and_the_packages_lines_are_kept(line):
    assert not native_log.is_noise(line)


@pytest.mark.parametrize(
    "argv",
    [
        ["python", "-m", "keras_attention.translation", "train"],
        ["python", "-X", "utf8", "-m", "keras_attention.export", "m.keras", "out"],
        ["/venv/bin/keras-attention-translate", "evaluate"],
    ],
)
def test_the_packages_commands_filter(argv):
    assert native_log.should_filter(environ={}, orig_argv=argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["python", "my_training.py"],
        ["python", "-c", "import keras_attention"],
        ["python", "-m", "pytest", "-q"],
        ["python", "-m", "keras_attention.translation", "--verbose", "train"],
        ["python"],
    ],
)
def test_a_users_process_or_a_verbose_command_is_left_alone(argv):
    assert not native_log.should_filter(environ={}, orig_argv=argv)


def test_the_variable_decides_whatever_the_command():
    command = ["python", "-m", "keras_attention.translation", "train"]
    script = ["python", "examples/g2p_cmudict.py", "--verbose", "0"]
    assert not native_log.should_filter({native_log.ENV_VAR: "0"}, command)
    assert native_log.should_filter({native_log.ENV_VAR: "1"}, script)


_CHILD = """
import os, sys, warnings
import keras_attention
from keras_attention.backend import native_log
print("filtered" if native_log.filtering() else "untouched", flush=True)
for line in {lines!r}:
    os.write(2, (line + "\\n").encode())
warnings.warn("a real warning")
raise RuntimeError("the end")
"""


def _child(env_value):
    env = {key: value for key, value in os.environ.items() if key != native_log.ENV_VAR}
    if env_value is not None:
        env[native_log.ENV_VAR] = env_value
    code = _CHILD.format(lines=STARTUP + KEPT[:1])
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )


def test_a_filtered_process_drops_the_noise_and_keeps_the_rest_in_order():
    result = _child("1")
    assert result.stdout.strip() == "filtered"
    lines = result.stderr.splitlines()
    assert not [line for line in lines if ABSL_LINE.match(line) and "tflite.cc" not in line]
    assert not [line for line in lines if "absl::InitializeLog" in line]
    kept = [line for line in lines if line in (KEPT[0], "Traceback (most recent call last):")]
    assert kept == [KEPT[0], "Traceback (most recent call last):"]
    assert "UserWarning: a real warning" in result.stderr
    assert lines[-1] == "RuntimeError: the end"
    assert result.returncode == 1


def test_a_users_process_keeps_every_line():
    result = _child(None)
    assert result.stdout.strip() == "untouched"
    for line in STARTUP:
        assert line in result.stderr.splitlines()


@pytest.mark.tensorflow
def test_the_export_command_prints_no_native_log_line():
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in (native_log.ENV_VAR, "TF_CPP_MIN_LOG_LEVEL")
    }
    result = subprocess.run(
        [sys.executable, "-m", "keras_attention.export", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout
    assert result.stderr == ""

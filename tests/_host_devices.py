"""`XLA_FLAGS` for a test's JAX process on several host CPU devices."""

import os


def host_devices_flags(count):
    """`--xla_force_host_platform_device_count=count` after the flags this
    process was given (tests/run_all_backends.sh lowers XLA's optimization
    level for every process it starts; a child keeps that)."""
    inherited = os.environ.get("XLA_FLAGS", "").strip()
    return f"{inherited} --xla_force_host_platform_device_count={count}".strip()

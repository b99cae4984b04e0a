"""`python -m keras_attention.translation COMMAND ...`: see `cli`."""

import sys

from keras_attention.translation.cli import console_main

if __name__ == "__main__":
    sys.exit(console_main(prog="python -m keras_attention.translation"))

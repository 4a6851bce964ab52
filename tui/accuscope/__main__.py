import sys

from .cli import main

if __name__ == "__main__":  # worker processes import this module again: do not rerun the CLI there
    sys.exit(main())

"""`python -m lab.handouts`: the handouts as A4 PDFs (see lab/handouts/build.py)."""

import sys

from .build import main

if __name__ == "__main__":
    sys.exit(main())

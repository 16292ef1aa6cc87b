"""`python -m lab.present`: presenter mode, the same as `dspark-lab present` (see lab/present/presenter.py)."""

import sys

from .presenter import main

if __name__ == "__main__":
    sys.exit(main())

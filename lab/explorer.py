"""`python -m lab.explorer --out docs/explorer.html`: write the DSpark Explorer page (see lab/present/explorer.py)."""

import sys

from .present.explorer import main

if __name__ == "__main__":
    sys.exit(main())

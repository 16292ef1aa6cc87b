"""`python -m lab …` is `dspark-lab …`."""

import sys

from .cli import main

sys.exit(main())

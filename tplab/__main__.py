"""`python -m tplab` is `tplab`."""

import sys

from tplab.cli import main

sys.exit(main())

"""`python -m tplab` is `tplab`."""

import sys

from tplab.commands.main import main

sys.exit(main())

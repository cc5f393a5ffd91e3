"""``python -m controller --config FILE``."""

import sys

from controller.app import main

sys.exit(main(sys.argv[1:]))

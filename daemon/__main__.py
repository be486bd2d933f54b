"""`python -m daemon` runs the `agent-daemon` command."""

import sys

from daemon.cli import main

sys.exit(main())

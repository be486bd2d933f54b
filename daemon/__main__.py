"""`python -m daemon` runs the `agent-daemon` command."""

import sys

from daemon.cli.main import main

sys.exit(main())

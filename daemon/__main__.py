"""`python -m daemon` runs the `agent-daemon` command."""

import sys

from daemon.cli.entry import main

sys.exit(main())

"""Everything that acts across the line between the daemon and its agents.

Who the agent is (`agent_user`: the account a root daemon runs agents as, checked at start-up),
which of a pool each task gets and the sweep of a uid before another task has it (`pool`),
what makes each run a kernel unit on this host (`containment`: a pid namespace and cgroups,
whose mechanics are `backends/process/unit.py` and `cgroups.py`), and the one way a root step
touches a place an agent can write (`beneath`: directory handles, no link followed) or reads a
file someone could have planted there (`untrusted`). The rule the lint test
(tests/daemon/boundary/test_boundary_lint.py) keeps: a module that works in an agent's tree
goes through `beneath`, or hands the act to the agent's own user. Root never runs a file an
agent could have written: `backends/cli_trust.py` checks each agent CLI before it is run.
"""

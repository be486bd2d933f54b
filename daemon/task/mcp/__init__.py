"""What a task's agent gets as MCP servers besides its own, as Multica's daemon serves them.

A claim may carry the workspace's plugin hooks an agent may call (`plugin_hook_tools`), remote
MCP servers an administrator approved (`remote_mcp_connections`, with a daemon token that never
reaches the agent) and the apps whose MCP servers the run has (`connected_apps`, a per-turn
prompt block: daemon/task/setup/turn_blocks.py). Each becomes a loopback MCP server of this
task's own, named in the agent's MCP configuration.

    loopback.py      the one HTTP server shape: loopback only, a random path, Host and Origin
                     checked, bounded connections, request sizes and deadlines
    plugin_tools.py  `multica-plugins`: the hooks as tools, each call sent to the server
    remote.py        a remote MCP server: its address checked, its tools discovered
    schema.py        a tool schema's digest, as Multica pins it
    broker.py        the remote server behind the loopback one, credential added per request
    overlay.py       all of them for one task, merged into its MCP configuration
"""

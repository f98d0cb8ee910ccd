"""``polite mcp``: a Model Context Protocol server whose ``fetch`` is polite by
construction (robots.txt, the delays every agent sharing its store keeps, the sites'
AI-usage preferences), for AI agents that read the web on a person's behalf. Its modules are
private; the command is its face (docs/how-to/mcp.md)."""

__all__: list[str] = []

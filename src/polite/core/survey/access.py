"""Whether a robots.txt file keeps an agent out entirely, partly or not at all: what the
studies of AI crawlers' consent measure today, decided by polite's own matcher.

* ``entirely``: the site's root ``/`` is disallowed to the agent (the matcher's answer for
  ``http://HOST/``; so ``Disallow: /`` beside ``Allow: /$`` is not entirely);
* ``partly``: the root is allowed but at least one Disallow rule with a path applies to the
  agent (from its own group, or from ``*`` when it has none);
* ``not_at_all``: no Disallow rule with a path applies to it.

``named`` says whether the file has a group of the agent's own (a User-agent line naming
it, as the dialect matches them), as opposed to rules it receives through ``*``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from polite.core.robots import Dialect, RobotsTxt

__all__ = ["Access", "AgentAccess", "agent_access"]


class Access(enum.StrEnum):
    ENTIRELY = "entirely"
    PARTLY = "partly"
    NOT_AT_ALL = "not_at_all"


@dataclass(frozen=True, slots=True)
class AgentAccess:
    access: Access
    named: bool


def _access(robots: RobotsTxt, agent: str, root: str) -> Access:
    if not robots.allowed(root, agent):
        return Access.ENTIRELY
    if any(not rule.allow and rule.pattern for rule in robots.rules_for(agent)):
        return Access.PARTLY
    return Access.NOT_AT_ALL


def agent_access(robots: RobotsTxt, agents: tuple[str, ...], host: str = "example.com"
                 ) -> dict[str, AgentAccess]:
    """Each agent's access to the site whose robots.txt is ``robots``."""
    root = f"http://{host}/"
    found = {}
    # Every agent the file does not name gets the same groups (those of "*"), so one of
    # them stands for all: a file of 10,000 rules is then indexed once, not per agent.
    # REGP's brace blocks may name agents of their own, so REGP files are asked per agent.
    shared: Access | None = None
    for agent in agents:
        named = robots.names_agent(agent)
        if named or robots.dialect is Dialect.REGP:
            access = _access(robots, agent, root)
        else:
            if shared is None:
                shared = _access(robots, agent, root)
            access = shared
        found[agent] = AgentAccess(access, named)
    return found

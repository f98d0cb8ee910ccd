"""AI-usage preferences: what a site says about the uses of its content (training, search,
AI input), in each of the ways a site can say it.

The submodules are imported by name: :mod:`sf` (RFC 9651 dictionaries), :mod:`vocab` (the
vocabularies, revision by revision), :mod:`statement` (one line or header read into
preferences) and :mod:`engine` (every source for a URL and an agent, combined). This package
imports none of them, so that the robots.txt reader can use :mod:`statement` without a cycle.
"""

__all__: list[str] = []

"""AI-usage preferences, the parts that need no robots.txt: :mod:`sf` (RFC 9651
dictionaries), :mod:`vocab` (the vocabularies, revision by revision) and :mod:`statement`
(one statement read into preferences). The robots.txt reader uses :mod:`statement`; the
sources of a URL and their combination are :mod:`polite.core.robots.usage`.
"""

__all__: list[str] = []

"""Web Bot Auth: robots' keys (:mod:`.keys`), signed requests and their checking
(:mod:`.signatures`), key directories fetched for a site (:mod:`.directory`), and the
settings that turn signing on (:mod:`.options`).

The cryptography and RFC 9421 canonicalisation come from ``cryptography`` and
``http-message-signatures`` (the ``identity`` extra); the pure checks are in
:mod:`polite.core.identity`. Nothing is imported here, so that naming this package costs
nothing to those who do not sign.
"""

from __future__ import annotations

__all__: list[str] = []

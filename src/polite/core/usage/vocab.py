"""The vocabularies of AI-usage preferences, revision by revision.

The IETF AIPREF vocabulary (draft-ietf-aipref-vocab) changed its labels between revisions:
-01 had ``tdm``/``ai``/``genai``/``search``/``inference``; -02 ``all``/``train-ai``/
``train-genai``/``ai-use``/``search``; -03 ``bots``/``train-ai``/``train-genai``/``search``;
-04 ``bots``/``train-ai``/``ai-output``/``search``; -05 to -07 ``train-ai`` and ``search``.
Revisions -01 to -04 nest categories (a preference for ``bots`` covers ``train-ai`` unless
that is stated); -05 on do not. Cloudflare's Content Signals: draft-romm-aipref-
contentsignals-00 (1 October 2025) defines only the labels ``search``, ``ai-input`` and
``ai-train``; the ``Content-Signal`` line and its ``yes``/``no`` values come from
Cloudflare's Content Signals Policy (contentsignals.org), which the draft does not describe.

Every answer names the revision it was read with, so that a table change shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "AIPREF_REVISIONS",
    "CONTENT_SIGNALS",
    "CURRENT",
    "MAIN_PURPOSES",
    "PURPOSES",
    "Vocabulary",
    "vocabulary",
]

# The uses polite can be asked about (``polite crawl --purpose``). ``train-genai`` and
# ``ai-output`` exist only in older AIPREF revisions; asked under a revision without them,
# the broader purpose in _BROADER answers.
PURPOSES = ("search", "train-ai", "ai-input", "train-genai", "ai-output")
MAIN_PURPOSES = PURPOSES[:3]
_BROADER = {"train-genai": "train-ai"}


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """One revision of one vocabulary. ``labels`` maps a key as written to the purpose it
    states; ``parents`` maps a purpose to the broader one whose preference it inherits when
    it is not stated itself; ``allow``/``disallow`` are the token values."""

    name: str
    labels: dict[str, str]
    parents: dict[str, str] = field(default_factory=dict)
    allow: str = "y"
    disallow: str = "n"

    def chain(self, purpose: str) -> tuple[str, ...]:
        """The labels to consult for ``purpose``, most specific first; empty when the
        revision says nothing about it."""
        by_purpose = {p: label for label, p in self.labels.items()}
        if purpose not in by_purpose and purpose in _BROADER:
            purpose = _BROADER[purpose]
        labels: list[str] = []
        seen: set[str] = set()
        while purpose in by_purpose and purpose not in seen:
            seen.add(purpose)
            labels.append(by_purpose[purpose])
            purpose = self.parents.get(purpose, "")
        return tuple(labels)


def _aipref(rev: str, labels: dict[str, str], parents: dict[str, str] | None = None
            ) -> Vocabulary:
    return Vocabulary(f"draft-ietf-aipref-vocab-{rev}", labels, parents or {})


_SAME = {"train-ai": "train-ai", "search": "search"}

AIPREF_REVISIONS: dict[str, Vocabulary] = {
    v.name: v for v in (
        _aipref("01", {"tdm": "bots", "ai": "train-ai", "genai": "train-genai",
                       "search": "search", "inference": "ai-input"},
                {"train-ai": "bots", "train-genai": "train-ai", "ai-input": "bots",
                 "search": "bots"}),
        _aipref("02", {"all": "bots", "train-ai": "train-ai", "train-genai": "train-genai",
                       "ai-use": "ai-input", "search": "search"},
                {"train-ai": "bots", "train-genai": "train-ai", "ai-input": "bots",
                 "search": "bots"}),
        _aipref("03", {"bots": "bots", "train-ai": "train-ai", "train-genai": "train-genai",
                       "search": "search"},
                {"train-ai": "bots", "train-genai": "train-ai", "search": "bots"}),
        _aipref("04", {"bots": "bots", "train-ai": "train-ai", "ai-output": "ai-output",
                       "search": "search"},
                {"train-ai": "bots", "ai-output": "bots", "search": "ai-output"}),
        _aipref("05", dict(_SAME)),
        _aipref("06", dict(_SAME)),
        _aipref("07", dict(_SAME)),
    )
}
CURRENT = "draft-ietf-aipref-vocab-07"

CONTENT_SIGNALS = Vocabulary(
    "draft-romm-aipref-contentsignals-00",
    {"search": "search", "ai-input": "ai-input", "ai-train": "train-ai"},
    allow="yes", disallow="no")


def vocabulary(name: str) -> Vocabulary | None:
    """The AIPREF revision named ``name`` (``07``, ``vocab-07`` or the full draft name)."""
    if name in AIPREF_REVISIONS:
        return AIPREF_REVISIONS[name]
    rev = name.rsplit("-", 1)[-1]
    return AIPREF_REVISIONS.get(f"draft-ietf-aipref-vocab-{rev}")

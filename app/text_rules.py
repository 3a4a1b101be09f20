"""What user text may hold, checked once on the way in (issue 33).

Every free-text input (post and comment bodies, display names, handles) is put in NFC
first, so one text has one stored form and lengths count what a reader sees (a letter and
its accent sent apart count once). Then characters that hide or disguise text are refused,
naming the field, instead of being stored:

- everywhere: control characters (C0, DEL, C1) except newline and tab in bodies (CR LF and
  a lone CR become LF), lone surrogates (a JSON escape such as "\\ud800", which no UTF-8 text
  can hold), bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069: they reorder
  the text after them, "admin\\u202egnp.exe" shows as "adminexe.png"), and more than
  COMBINING_RUN_MAX combining marks in a row ("Zalgo" text that spills over other lines);
- in names (display names, handles) also every other format character (category Cf: the
  bidi marks U+200E/200F/061C, zero-width U+200B-200D, U+2060, U+FEFF, soft hyphen, tags)
  and line or paragraph separators, so two names that look the same are the same text.

Stored rows are not rewritten; only new input is checked. Domain logic only: the services
that check lengths call it, and BadInput becomes BAD_USER_INPUT at the API.
"""

from __future__ import annotations

import unicodedata
from enum import Enum

from app.constants import COMBINING_RUN_MAX
from app.errors import BadInput

_BIDI_FORMATTING = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BODY_CONTROLS_ALLOWED = frozenset("\n\t")
_BODY_ALLOWED = {ord(c): "x" for c in _BODY_CONTROLS_ALLOWED}  # printable stand-ins


class Kind(Enum):
    """Which rules a field follows: multi-line text, or a one-line name."""

    BODY = "body"
    NAME = "name"


def _describe(char: str) -> str:
    if unicodedata.category(char) == "Cs":
        return f"U+{ord(char):04X} (a lone surrogate, not a character)"
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


def _refused(char: str, kind: Kind) -> bool:
    category = unicodedata.category(char)
    if category == "Cc":
        return kind is Kind.NAME or char not in _BODY_CONTROLS_ALLOWED
    if category == "Cs" or char in _BIDI_FORMATTING:
        return True
    return kind is Kind.NAME and category in ("Cf", "Zl", "Zp")


def clean(field: str, text: str, kind: Kind) -> str:
    """`text` in NFC (bodies: with LF line ends), or BadInput naming `field` and the first
    character refused. Trimming and lengths are the caller's, on what this returns."""
    if kind is Kind.BODY:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.isascii():  # the common case, in C: only controls to look for, nothing to compose
        if not text.translate(_BODY_ALLOWED if kind is Kind.BODY else {}).isprintable():
            _refuse(field, text, kind)
        return text
    text = unicodedata.normalize("NFC", text)  # keeps lone surrogates: _refuse finds them
    _refuse(field, text, kind)
    return text


def _refuse(field: str, text: str, kind: Kind) -> None:
    """BadInput for the first character refused in `text`, or for a run of combining marks
    longer than COMBINING_RUN_MAX; nothing when there is neither."""
    run = 0
    for char in text:
        if _refused(char, kind):
            raise BadInput(f"The {field} may not contain the character {_describe(char)}.")
        run = run + 1 if unicodedata.category(char)[0] == "M" else 0
        if run > COMBINING_RUN_MAX:
            raise BadInput(
                f"The {field} stacks more than {COMBINING_RUN_MAX} combining marks on one "
                "character."
            )


def nfc(text: str) -> str:
    """Only the normalization, for text that is looked up, not stored (a search prefix):
    a name sent decomposed finds the composed one stored."""
    return unicodedata.normalize("NFC", text)

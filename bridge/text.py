"""The rules for tenant-controlled text, in ONE place (pure).

Text a tenant controls (annotation values, object and owner names, namespaces, uids,
labels) reaches Slurm (job name, comment, admin_comment, account ...) and our logs,
events and webhook answers. Two uses, one set of rules:

* :func:`text_problem` / :func:`checked_text` for text that reaches Slurm: at most
  :data:`TEXT_MAX` characters and no control or format characters (:data:`HIDDEN`),
  else the input is refused with an :class:`~bridge.errors.InvalidInput` naming the
  field. squeue, sacct and scontrol print these fields as they are: a newline forges a
  line, U+202E reverses what follows, a zero-width space makes two names look alike.
* :func:`token_problem` / :func:`checked_token` for driver text (a ResourceSlice's MIG
  profile) that becomes a word of a Slurm line (a GRES type in a node's ``Gres=``): only
  :data:`SLURM_TOKEN`'s characters, so it stays data, never syntax (a profile
  ``Weight=1 Features=x`` would add fields to the node's line). :func:`gres_problem`
  applies it to each word of a whole ``Gres=`` value.
* :func:`clip` for text that only reaches a log, an event or an answer: never refused
  (the message is about the refusal), but cut to a length and with every hidden
  character written as an escape (``\\u202e``), so one request cannot write megabytes
  into a log line or hide text in it.
"""

from __future__ import annotations

import re
import unicodedata

from bridge.errors import InvalidInput

# The longest tenant text sent to Slurm (a job name, a comment's parts, an account ...).
TEXT_MAX = 1024
# The longest tenant text in one log value, event or webhook answer field.
CLIP_MAX = 512
# Unicode categories refused in text that reaches Slurm: controls (C0, C1 such as U+0085),
# format characters (bidi overrides such as U+202E, zero-width U+200B..U+200D, U+FEFF),
# line and paragraph separators (U+2028, U+2029), unassigned and private-use code points,
# and lone surrogates (not UTF-8 at all).
HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _visible_ascii(text: str) -> bool:
    # printable ASCII has no hidden character: the common case costs two C calls
    return text.isascii() and text.isprintable()


def hidden_at(text: str) -> int | None:
    """The index of the first control or format character in ``text``, or None."""
    if _visible_ascii(text):
        return None
    return next((i for i, c in enumerate(text) if unicodedata.category(c) in HIDDEN), None)


def text_problem(text: str, *, max_len: int = TEXT_MAX) -> str | None:
    """Why ``text`` may not reach Slurm (too long, a hidden character), or None."""
    if len(text) > max_len:
        return f"longer than {max_len} characters ({len(text)})"
    bad = hidden_at(text)
    if bad is not None:
        return (
            f"must not contain control or format characters (U+{ord(text[bad]):04X} at "
            f"position {bad}): they hide or reorder what squeue and sacct show"
        )
    return None


def checked_text(
    value: str, field: str, obj: str | None, *, max_len: int = TEXT_MAX, strip: bool = True
) -> str:
    """``value`` (stripped) when it may reach Slurm, else :class:`InvalidInput` naming
    ``field`` and the reason. Empty text is refused too."""
    text = value.strip() if strip else value
    if not text:
        raise InvalidInput(field, "must not be empty", obj)
    problem = text_problem(text, max_len=max_len)
    if problem is not None:
        raise InvalidInput(field, problem, obj)
    return text


# One word of a Slurm line built from driver text: a GRES name or type, a MIG profile
# (1g.10gb+me), at most 64 characters; no space, '=', ',', ':', '(' or anything else
# Slurm's line syntax reads.
SLURM_TOKEN = re.compile(r"[A-Za-z0-9_.+-]{1,64}")


def token_problem(value: object) -> str | None:
    """Why ``value`` may not be a word of a Slurm line (see :data:`SLURM_TOKEN`), or None."""
    if isinstance(value, str) and SLURM_TOKEN.fullmatch(value):
        return None
    return (
        f"{clip(value, 80)!r} is not a Slurm word: 1 to 64 letters, digits, '_', '.', '+' "
        "or '-' (it would become Slurm syntax)"
    )


def checked_token(value: object, field: str, obj: str | None = None) -> str:
    """``value`` when it may be a word of a Slurm line, else InvalidInput naming ``field``."""
    problem = token_problem(value)
    if problem is not None:
        raise InvalidInput(field, problem, obj)
    return str(value)


def gres_problem(text: str) -> str | None:
    """Why ``text`` is not a ``Gres=`` value of words (``gpu:2,gpu:1g.10gb:7``: each item
    ``name[:type]:count``), or None."""
    for item in text.split(","):
        *words, count = item.split(":")
        if not (1 <= len(words) <= 2 and count.isdigit()):
            return f"item {clip(item, 80)!r} is not name[:type]:count"
        for w in words:
            problem = token_problem(w)
            if problem is not None:
                return f"item {clip(item, 80)!r}: {problem}"
    return None


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def clip(value: object, max_len: int = CLIP_MAX) -> str:
    """``value`` as text for a log, an event or an answer: hidden characters escaped,
    at most about ``max_len`` characters, with how many were left off. Never raises."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= max_len and _visible_ascii(text):
        return text
    out: list[str] = []
    used = 0
    taken = 0
    for c in text:
        piece = _escape(c) if unicodedata.category(c) in HIDDEN else c
        if used + len(piece) > max_len:
            break
        out.append(piece)
        used += len(piece)
        taken += 1
    rest = len(text) - taken
    return "".join(out) + (f"...(+{rest} chars)" if rest else "")

"""inspect.Signature objects from packfn signature texts ("add(a: int, b: int) -> int")."""
from __future__ import annotations

import inspect
import keyword


def _split_params(text: str, space: str | None = None) -> list[str]:
    """The comma-separated parameters of a parameter list (commas inside brackets kept), each
    stripped of `space` (None: any whitespace, as str.strip)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip(space))
            cur = ""
        else:
            cur += ch
    if cur.strip(space):
        out.append(cur.strip(space))
    return out


def _param_span(text: str) -> tuple[int, int] | None:
    """The indexes of the first '(' and of the ')' that closes it, or None when there is no such
    pair. The result annotation after it may hold parentheses too ("-> Tuple(int, int)")."""
    open_ = text.find("(")
    if open_ < 0:
        return None
    depth = 0
    for i in range(open_, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return open_, i
    return None


def _param_list(sig: str) -> str:
    """The text between the first '(' and the ')' that closes it ("" when there is none), as
    the XLA adapter reads it (packfn.jax)."""
    span = _param_span(sig)
    return sig[span[0] + 1 : span[1]] if span else ""


def signature_from_text(text: str) -> inspect.Signature | None:
    """Parses a signature text into positional-only parameters with string annotations.
    None when the text does not have the form name(params) [-> result]. The parameters end at
    the ')' closing the first '(' (not at the last ')', which may close a result annotation
    such as "Tuple(int, int)": review), and the result annotation is read after it."""
    span = _param_span(text)
    if span is None:
        return None
    open_, close = span
    params = []
    for i, p in enumerate(_split_params(text[open_ + 1 : close])):
        kind = inspect.Parameter.POSITIONAL_ONLY
        if p.startswith("*"):
            kind, p = inspect.Parameter.VAR_POSITIONAL, p.lstrip("*")
        name, _, ann = p.partition(":")
        name = name.strip() or f"arg{i}"
        # inspect.Parameter takes a keyword as a positional-only name only: "*in" raised
        # ValueError out of __signature__ (review)
        if not name.isidentifier() or (kind != inspect.Parameter.POSITIONAL_ONLY
                                       and keyword.iskeyword(name)):
            name = f"arg{i}"
        ann = ann.strip()
        params.append(
            inspect.Parameter(name, kind, annotation=ann if ann else inspect.Parameter.empty)
        )
    rest = text[close + 1 :].strip()
    ret = rest[2:].strip() if rest.startswith("->") else inspect.Signature.empty
    try:
        return inspect.Signature(params, return_annotation=ret)
    except ValueError:
        return None

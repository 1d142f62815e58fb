"""inspect.Signature objects from packfn signature texts ("add(a: int, b: int) -> int")."""
from __future__ import annotations

import inspect


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


def signature_from_text(text: str) -> inspect.Signature | None:
    """Parses a signature text into positional-only parameters with string annotations.
    None when the text does not have the form name(params) [-> result]."""
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < open_:
        return None
    params = []
    for i, p in enumerate(_split_params(text[open_ + 1 : close])):
        kind = inspect.Parameter.POSITIONAL_ONLY
        if p.startswith("*"):
            kind, p = inspect.Parameter.VAR_POSITIONAL, p.lstrip("*")
        name, _, ann = p.partition(":")
        name = name.strip() or f"arg{i}"
        if not name.isidentifier():
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

"""The names a piece of the dashboard's JavaScript declares at its top level and the names it uses without
declaring them, read from its text: a tokenizer (comments, strings, template literals, regular expressions)
and the declarations the browser code writes (``function f(a, b)``, ``const``/``let``/``var`` declarators,
arrow parameters, ``catch (e)``). One scope per file: a name declared anywhere in it counts as its own.

Enough for the style of ``dashboard/*/js/`` (no destructuring, no classes, no labels); ``test_dashboard_js_
contracts.py`` checks it on made-up code and holds every browser file's header (``jscode.contract``) to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEYWORDS = frozenset("""break case catch const continue default delete do else false finally for function if in
instanceof let new null of return switch this throw true try typeof undefined var void while""".split())
REGEX_AFTER = frozenset("( , = : [ ! & | ? { } ; + - * % < > ~ ^ return typeof".split()) | {"&&", "||", "=>"}
_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_NUMBER = re.compile(r"\d[\d_]*(\.\d*)?([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?")
_PUNCT = re.compile(r"===|!==|=>|==|!=|<=|>=|&&|\|\||\+\+|--|\+=|-=|\*=|/=|\?\.|\.\.\.|[{}()\[\];,.?:=!<>+\-*/%&|^~]")


@dataclass(frozen=True)
class Token:
    kind: str  # name, number, string, regex, punct
    text: str
    depth: int  # braces open around it
    parens: int  # parentheses and brackets open around it


def tokens(code: str) -> list[Token]:
    out: list[Token] = []
    _scan(code, out, 0, 0)
    return out


def _scan(code: str, out: list[Token], depth: int, parens: int) -> None:
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c.isspace():
            i += 1
        elif code.startswith("//", i):
            i = code.find("\n", i) if "\n" in code[i:] else n
        elif code.startswith("/*", i):
            i = code.index("*/", i) + 2
        elif c in "'\"":
            j = i + 1
            while code[j] != c:
                j += 2 if code[j] == "\\" else 1
            out.append(Token("string", code[i:j + 1], depth, parens))
            i = j + 1
        elif c == "`":
            i = _template(code, i, out, depth, parens)
        elif c == "/" and (not out or out[-1].text in REGEX_AFTER):
            j, in_class = i + 1, False
            while in_class or code[j] != "/":
                in_class = (in_class or code[j] == "[") and code[j] != "]"
                j += 2 if code[j] == "\\" else 1
            j += 1
            while j < n and code[j].isalpha():
                j += 1
            out.append(Token("regex", code[i:j], depth, parens))
            i = j
        elif (m := _NAME.match(code, i)) is not None:
            out.append(Token("name", m.group(), depth, parens))
            i = m.end()
        elif (m := _NUMBER.match(code, i)) is not None:
            out.append(Token("number", m.group(), depth, parens))
            i = m.end()
        else:
            m = _PUNCT.match(code, i)
            if m is None:
                raise ValueError(f"cannot read {code[i:i + 20]!r}")
            p = m.group()
            if p in ")]":
                parens -= 1
            elif p == "}":
                depth -= 1
            out.append(Token("punct", p, depth, parens))
            if p in "([":
                parens += 1
            elif p == "{":
                depth += 1
            i = m.end()


def _template(code: str, i: int, out: list[Token], depth: int, parens: int) -> int:
    """A template literal from ``code[i]`` (its backtick): a string, and the tokens of each ``${...}``."""
    j = i + 1
    out.append(Token("string", "`", depth, parens))
    while code[j] != "`":
        if code[j] == "\\":
            j += 2
        elif code.startswith("${", j):
            k, level = j + 2, 1
            while level:
                level += {"{": 1, "}": -1}.get(code[k], 0)
                k += 1
            out.append(Token("punct", "(", depth, parens))
            _scan(code[j + 2:k - 1], out, depth, parens + 1)
            out.append(Token("punct", ")", depth, parens))
            j = k
        else:
            j += 1
    return j + 1


def declarations(toks: list[Token]) -> tuple[set[str], set[str]]:
    """(every name the code declares, those it declares at its top level: outside braces and parentheses)."""
    every, top = set(), set()
    for k, t in enumerate(toks):
        before = toks[k - 1].text if k else ""
        after = toks[k + 1].text if k + 1 < len(toks) else ""
        if t.kind == "name" and before in ("function", "const", "let", "var"):
            for j in [k, *(_more_declarators(toks, k) if before != "function" else [])]:
                every.add(toks[j].text)
                if toks[j].depth == 0 and toks[j].parens == 0:
                    top.add(toks[j].text)
            if before == "function":
                every.update(_params(toks, k + 1))
        elif t.text in ("function", "catch") and after == "(":  # an anonymous function's, a catch's parameters
            every.update(_params(toks, k + 1))
        elif t.kind == "name" and after == "=>":  # x => ...
            every.add(t.text)
        elif t.text == "=>" and before == ")":  # (a, b) => ...
            every.update(_params(toks, _opening(toks, k - 1)))
    return every, top


def _opening(toks: list[Token], close: int) -> int:
    level = 0
    for j in range(close, -1, -1):
        level += {")": 1, "(": -1}.get(toks[j].text, 0)
        if level == 0:
            return j
    raise ValueError("unbalanced parentheses")


def _params(toks: list[Token], open_: int) -> list[str]:
    """The names in the parameter list opening at ``toks[open_]`` ("(")."""
    out, j = [], open_ + 1
    while toks[j].text != ")":
        if toks[j].kind == "name" and toks[j - 1].text in ("(", ","):
            out.append(toks[j].text)
        j += 1
    return out


def _more_declarators(toks: list[Token], first: int) -> list[int]:
    """The indices of the names declared after the first one of a ``const a = x, b = y;`` statement."""
    out, depth, parens = [], toks[first].depth, toks[first].parens
    for j in range(first + 1, len(toks)):
        t = toks[j]
        if t.depth == depth and t.parens == parens:
            if t.text in (";", "of", "in") or t.text in ("const", "let", "var", "function", "if", "for", "return"):
                break
            if t.text == "," and j + 2 < len(toks) and toks[j + 1].kind == "name" and toks[j + 2].text == "=":
                out.append(j + 1)
        elif t.depth < depth or t.parens < parens:
            break
    return out


def used(toks: list[Token]) -> set[str]:
    """The names the code reads: not a member (``.x``), not an object literal's key (``{x: ...}``), no keyword."""
    out = set()
    for k, t in enumerate(toks):
        if t.kind != "name" or t.text in KEYWORDS:
            continue
        before = toks[k - 1].text if k else ""
        after = toks[k + 1].text if k + 1 < len(toks) else ""
        if before in (".", "?.") or (after == ":" and before in ("{", ",")):
            continue
        out.add(t.text)
    return out


def free_and_top(code: str) -> tuple[set[str], set[str]]:
    """(the names ``code`` uses without declaring them, the names it declares at its top level)."""
    toks = tokens(code)
    every, top = declarations(toks)
    return used(toks) - every, top

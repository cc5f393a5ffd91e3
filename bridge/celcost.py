"""The worst-case cost of a CEL expression, counted like Kubernetes counts it (pure).

The ``cel`` library that evaluates expressions (:mod:`bridge.cel`) has a parser and an
interpreter but neither a cost estimator nor a runtime cost limit, so this module parses
the expression itself (CEL's grammar, cel-spec ``langdef.md``) and estimates the most an
evaluation can cost, in CEL's cost units, the way cel-go's ``checker.EstimateCost`` does
with the sizes Kubernetes declares for the variables (for DRA selectors,
``k8s.io/dynamic-resource-allocation/cel``: a driver name of at most 63 characters, at most
32 attribute domains of at most 32 attributes, a value of at most 64 characters):

- a constant costs 0; an identifier, a field selection, ``has()`` and an index 1 each;
- a list literal 10, a map literal 30 (plus their elements);
- a function or operator 1, except those whose cost grows with their operands: string
  ``==``/``<``... and ``+``, ``contains``, ``startsWith``/``endsWith`` (0.1 a character:
  cel-go's ``StringTraversalCostFactor``), ``matches`` (0.1 a character of the string
  times 0.25 a character of the pattern: ``RegexStringLengthCostFactor``; plus
  :data:`REGEX_CALL`, the bridge's own call to RE2), ``in`` a list (its size);
- a comprehension (``all``, ``exists``, ``exists_one``, ``map``, ``filter``) its range,
  plus per element its body and 2 (``map``/``filter``: 12, the list they build);
- ``&&``, ``||`` and ``?:`` the sum of their operands (the worst case runs them all).

The result is an upper bound of what one evaluation does, whatever the variable's value
within the declared sizes: a count, never a clock. :func:`call_spans` also gives where the
expression calls a function by name, which :mod:`bridge.cel` uses to route ``matches`` to
regexes compiled once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

STRING_TRAVERSAL = 0.1  # cel-go common.StringTraversalCostFactor
REGEX_LENGTH = 0.25  # cel-go common.RegexStringLengthCostFactor
LIST_BASE = 10  # cel-go createListBaseCost
MAP_BASE = 30  # cel-go createMapBaseCost
UNKNOWN_SIZE = 10 * 1024  # a size nothing declares: the longest expression's
# the bridge's own: a matches() call leaves the library for RE2 and back (~2.5 us, ~50x an
# operator), which cel-go's in-process regex does not pay
REGEX_CALL = 50

_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


class ParseError(ValueError):
    """The expression is not CEL this module can parse."""


@dataclass(frozen=True)
class Shape:
    """The most a value can hold: a string's or bytes' length, a list's or map's entries
    (``elem``: what each holds), an object's ``fields``."""

    size: int = 1
    elem: Shape | None = None
    fields: Mapping[str, Shape] | None = field(default=None, hash=False, compare=False)


UNKNOWN = Shape(UNKNOWN_SIZE)


# ------------------------------------------------------------------------------ lexing
class Token(NamedTuple):
    tag: str  # "id", "num", "str", "op", "end"
    text: str
    start: int
    size: int = 0  # a string literal's length (at most its characters)


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<str>(?:[rR][bB]?|[bB][rR]?)?(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''
        |"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<num>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d+|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[uU]?)
  | (?P<id>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!+\-*/%?:.,()\[\]{}])
    """,
    re.VERBOSE | re.DOTALL,
)


def count_tokens(source: str) -> int:
    """How many tokens :func:`tokens` would give (without making them: a count is all a
    budget needs before compiling)."""
    match = _TOKEN.match
    pos = 0
    end = len(source)
    n = 0
    while pos < end:
        m = match(source, pos)
        if m is None:
            raise ParseError(f"unexpected character {source[pos]!r} at {pos}")
        if m.lastgroup != "ws":
            n += 1
        pos = m.end()
    return n + 1  # and the end


def tokens(source: str) -> list[Token]:
    """The expression's tokens (never searching past one that does not lex: linear)."""
    out: list[Token] = []
    append = out.append
    match = _TOKEN.match
    pos = 0
    end = len(source)
    while pos < end:
        m = match(source, pos)
        if m is None:
            raise ParseError(f"unexpected character {source[pos]!r} at {pos}")
        tag = m.lastgroup
        if tag == "str":
            text = m.group()
            body = text.lstrip("rRbB")
            quote = 3 if body[:3] in ('"""', "'''") else 1
            append(Token(tag, text, pos, len(body) - 2 * quote))
        elif tag != "ws":
            append(Token(tag or "", m.group(), pos))
        pos = m.end()
    append(Token("end", "", pos))
    return out


# ----------------------------------------------------------------------------- parsing
@dataclass(frozen=True)
class Node:
    """``op``: lit, id, sel, has, idx, call, list, map, cond, and, or, not, neg, bin,
    comp. ``value``: a literal's Shape, a name, a field, an operator, a call's (function,
    is_method), a comprehension's (macro, variable)."""

    op: str
    args: tuple[Node, ...] = ()
    value: Any = None
    text: str | None = None  # a plain string literal's value (no escape, no prefix)


class _Parser:
    def __init__(self, toks: list[Token]) -> None:
        self.toks = toks
        self.i = 0

    def peek(self, text: str) -> bool:
        t = self.toks[self.i]
        return (t.tag == "op" and t.text == text) or (t.tag == "id" and t.text == text)

    def take(self, text: str) -> None:
        if not self.peek(text):
            t = self.toks[self.i]
            raise ParseError(f"expected {text!r} at {t.start}, got {t.text!r}")
        self.i += 1

    def parse(self) -> Node:
        node = self.expr()
        if self.toks[self.i].tag != "end":
            raise ParseError(f"unexpected {self.toks[self.i].text!r}")
        return node

    def expr(self) -> Node:
        cond = self.binary(0)
        if self.peek("?"):
            self.i += 1
            yes = self.binary(0)
            self.take(":")
            return Node("cond", (cond, yes, self.expr()))
        return cond

    _PRECEDENCE: Mapping[str, int] = {
        "||": 0,
        "&&": 1,
        **dict.fromkeys(("==", "!=", "<", "<=", ">", ">=", "in"), 2),
        "+": 3,
        "-": 3,
        "*": 4,
        "/": 4,
        "%": 4,
    }

    def binary(self, level: int) -> Node:
        """Precedence climbing (a frame per level of nesting, not per operator level);
        a chain of ``&&`` or of ``||`` is one node, however long."""
        left = self.unary()
        while True:
            t = self.toks[self.i]
            prec = self._PRECEDENCE.get(t.text, -1) if t.tag in ("op", "id") else -1
            if prec < level:
                return left
            self.i += 1
            right = self.binary(prec + 1)
            if t.text in ("&&", "||"):
                joined = "and" if t.text == "&&" else "or"
                args = left.args if left.op == joined else (left,)
                left = Node(joined, (*args, right), t.text)
            else:
                left = Node("bin", (left, right), t.text)

    def unary(self) -> Node:
        ops: list[str] = []
        while self.peek("!") or self.peek("-"):
            ops.append(self.toks[self.i].text)
            self.i += 1
        node = self.member()
        if ops:  # a chain of them is one node: its value, how many
            node = Node("not" if ops[-1] == "!" else "neg", (node,), len(ops))
        return node

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.peek("."):
                self.i += 1
                name = self.ident()
                if self.peek("("):
                    args = self.call_args()
                    node = self.method(node, name, args)
                else:
                    node = Node("sel", (node,), name)
            elif self.peek("["):
                self.i += 1
                index = self.expr()
                self.take("]")
                node = Node("idx", (node, index))
            else:
                return node

    def method(self, target: Node, name: str, args: list[Node]) -> Node:
        if name in _MACROS and args and args[0].op == "id" and len(args) in (2, 3):
            return Node("comp", (target, *args[1:]), (name, args[0].value))
        return Node("call", (target, *args), (name, True))

    def ident(self) -> str:
        t = self.toks[self.i]
        if t.tag != "id":
            raise ParseError(f"expected a name at {t.start}, got {t.text!r}")
        self.i += 1
        return t.text

    def call_args(self) -> list[Node]:
        self.take("(")
        args: list[Node] = []
        while not self.peek(")"):
            args.append(self.expr())
            if not self.peek(")"):
                self.take(",")
        self.i += 1
        return args

    def items(self, close: str) -> list[Node]:
        out: list[Node] = []
        while not self.peek(close):
            out.append(self.expr())
            if close == "}":
                self.take(":")
                out.append(self.expr())
            if not self.peek(close):
                self.take(",")
        self.i += 1
        return out

    def primary(self) -> Node:
        t = self.toks[self.i]
        if t.tag == "op" and t.text == ".":  # a leading dot: the root namespace
            self.i += 1
            t = self.toks[self.i]
        self.i += 1
        if t.tag == "str":
            plain = t.text[0] in "'\"" and t.text[:3] not in ('"""', "'''") and "\\" not in t.text
            return Node("lit", value=Shape(t.size), text=t.text[1:-1] if plain else None)
        if t.tag == "num":
            return Node("lit", value=Shape(1))
        if t.tag == "id":
            if t.text in ("true", "false", "null"):
                return Node("lit", value=Shape(1))
            if self.peek("("):
                args = self.call_args()
                if t.text == "has" and len(args) == 1:
                    return Node("has", tuple(args))
                return Node("call", tuple(args), (t.text, False))
            if self.peek("{"):  # a message: Name{field: value}
                self.i += 1
                fields = self.items("}")
                return Node("map", tuple(fields))
            return Node("id", value=t.text)
        if t.tag == "op" and t.text == "(":
            node = self.expr()
            self.take(")")
            return node
        if t.tag == "op" and t.text == "[":
            return Node("list", tuple(self.items("]")))
        if t.tag == "op" and t.text == "{":
            return Node("map", tuple(self.items("}")))
        raise ParseError(f"unexpected {t.text!r} at {t.start}")


def parse(source: str, toks: list[Token] | None = None) -> Node:
    """The expression's syntax tree (from its ``toks`` when given); :class:`ParseError`
    if it is not CEL."""
    try:
        return _Parser(toks if toks is not None else tokens(source)).parse()
    except RecursionError as e:
        raise ParseError("nested too deeply") from e


def call_spans(toks: list[Token], name: str) -> list[tuple[int, int]]:
    """Where the expression calls the function ``name`` (``x.name(...)`` or
    ``name(...)``): the (start, end) of each call's name, never text inside a string."""
    return [
        (t.start, t.start + len(t.text))
        for i, t in enumerate(toks)
        if t.tag == "id" and t.text == name and toks[i + 1].text == "("
    ]


def read_paths(tree: Node) -> dict[str, tuple[tuple[str, ...], ...]]:
    """Per variable, the parts of it the expression reads: paths of fields and constant
    keys (``device`` -> ``("attributes", "gpu.nvidia.com", "profile")``), ``()`` for the
    whole value. Two values that agree there evaluate alike."""
    found: dict[str, set[tuple[str, ...]]] = {}

    def chain(n: Node) -> tuple[str, ...] | None:
        if n.op == "id":
            return (n.value,)
        if n.op == "sel":
            head = chain(n.args[0])
            return None if head is None else (*head, n.value)
        if n.op == "idx" and n.args[1].op == "lit" and n.args[1].text is not None:
            head = chain(n.args[0])
            return None if head is None else (*head, n.args[1].text)
        return None

    def visit(n: Node) -> None:
        path = chain(n)
        if path is not None:
            found.setdefault(path[0], set()).add(path[1:])
            return
        for a in n.args:
            visit(a)

    try:
        visit(tree)
    except RecursionError as e:
        raise ParseError("nested too deeply") from e
    return {name: tuple(sorted(paths)) for name, paths in found.items()}


# -------------------------------------------------------------------------- estimating
def _traverse(size: int) -> int:
    return math.ceil((1 + size) * STRING_TRAVERSAL)


class _Estimator:
    def __init__(self, variables: Mapping[str, Shape]) -> None:
        self.scopes: list[Mapping[str, Shape]] = [variables]

    def lookup(self, name: str) -> Shape:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return UNKNOWN

    def cost(self, n: Node) -> tuple[int, Shape]:
        op = n.op
        if op == "lit":
            return 0, n.value
        if op == "id":
            return 1, self.lookup(n.value)
        if op in ("sel", "has"):
            inner = n.args[0] if op == "sel" else n.args[0].args[0] if n.args[0].args else None
            c, s = self.cost(inner) if inner is not None else (0, UNKNOWN)
            field_name = n.value if op == "sel" else n.args[0].value
            if s.fields is not None:
                return c + 1, s.fields.get(field_name, UNKNOWN)
            return c + 1, s.elem or UNKNOWN
        if op == "idx":
            c1, s = self.cost(n.args[0])
            c2, _ = self.cost(n.args[1])
            return c1 + c2 + 1, s.elem or UNKNOWN
        if op in ("list", "map"):
            costs = [self.cost(a) for a in n.args]
            total = sum(c for c, _ in costs) + (LIST_BASE if op == "list" else MAP_BASE)
            elems = [s for _, s in costs][1::2] if op == "map" else [s for _, s in costs]
            elem = max(elems, key=lambda s: s.size, default=Shape(1))
            return total, Shape(len(elems), elem=elem)
        if op in ("and", "or", "cond"):
            costs = [self.cost(a) for a in n.args]
            shape = max((s for _, s in costs[-2:]), key=lambda s: s.size)
            return sum(c for c, _ in costs), shape
        if op in ("not", "neg"):
            c, s = self.cost(n.args[0])
            return c + (n.value or 1), s
        if op == "bin":
            (c1, s1), (c2, s2) = self.cost(n.args[0]), self.cost(n.args[1])
            c3, shape = self._binary(n.value, s1, s2)
            return c1 + c2 + c3, shape
        if op == "comp":
            return self._comprehension(n)
        return self._call(n)

    def _binary(self, op: str, left: Shape, right: Shape) -> tuple[int, Shape]:
        if op in _COMPARISONS:
            return _traverse(min(left.size, right.size)), Shape(1)
        if op == "in":  # a list's every element compared (a map's lookup is cheaper)
            return max(1, right.size * _traverse(left.size)), Shape(1)
        if op == "+":
            size = left.size + right.size
            return _traverse(size), Shape(size, elem=left.elem or right.elem)
        return 1, Shape(1)

    def _call(self, n: Node) -> tuple[int, Shape]:
        name, _ = n.value
        costs = [self.cost(a) for a in n.args]
        args = sum(c for c, _ in costs)
        shapes = [s for _, s in costs]
        if name == "matches" and len(shapes) == 2:
            regex = max(1, math.ceil(shapes[1].size * REGEX_LENGTH))
            return args + REGEX_CALL + _traverse(shapes[0].size) * regex, Shape(1)
        if name == "contains" and len(shapes) == 2:
            return args + _traverse(shapes[0].size) * _traverse(shapes[1].size), Shape(1)
        if name in ("startsWith", "endsWith") and len(shapes) == 2:
            return args + _traverse(shapes[1].size), Shape(1)
        if name in ("string", "bytes") and shapes:
            return args + _traverse(shapes[0].size), Shape(max(shapes[0].size, 20))
        if name == "size":
            return args + 1, Shape(1)
        return args + 1, shapes[0] if name == "dyn" and shapes else UNKNOWN

    def _comprehension(self, n: Node) -> tuple[int, Shape]:
        macro, var = n.value
        c_range, s_range = self.cost(n.args[0])
        elem = s_range.elem or UNKNOWN  # a map's: its values' shape, more than its keys'
        self.scopes.append({var: elem})
        try:
            bodies = [self.cost(b) for b in n.args[1:]]
        finally:
            self.scopes.pop()
        step = 12 if macro in ("map", "filter") else 2
        per = sum(c for c, _ in bodies) + step
        result = Shape(1)
        if macro in ("map", "filter"):
            result = Shape(s_range.size, elem=bodies[-1][1] if macro == "map" else elem)
        return c_range + s_range.size * per + 1, result


def estimate(node: Node, variables: Mapping[str, Shape]) -> int:
    """The most one evaluation of ``node`` costs with variables of at most ``variables``'
    sizes (a variable not named: :data:`UNKNOWN`)."""
    try:
        return _Estimator(variables).cost(node)[0]
    except RecursionError as e:
        raise ParseError("nested too deeply") from e

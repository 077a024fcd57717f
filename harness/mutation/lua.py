"""Mutation operators on Lua text: the scripts of a Redis queue (takeover.queues.redis_lease), each a string
constant of the queue's module, mutated as :mod:`takeover.mutation.sql` mutates a SQL queue's statements.

Why: a Redis queue's logic lives in its scripts (the fence of a finish, the ``HINCRBY`` of a claim, the
``ZREM`` that takes a finished task out of the running set), which Python's mutation operators never see
and SQL's do not parse. The operators are generic, one pattern of Lua each, applied at every place it
matches outside quoted strings, whatever the script means:

- ``relational``: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``~=``;
- ``boolean``: ``and`` <-> ``or``;
- ``drop-conjunct``: one operand of an ``and`` chain (a condition, or a fragment such as a fence handed to a
  builder) made ``true``;
- ``not-dropped``: a ``not`` removed;
- ``state``: a quoted state literal swapped for each other state;
- ``int``: an integer literal off by one both ways (not an ``ARGV[n]``/``KEYS[n]`` index: that is which
  argument is read, not a value);
- ``drop-call``: a ``redis.call(...)`` statement (a line of its own) removed: a write forgotten.

An operator yields ``(name, description, new_text)``, as the SQL ones do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from takeover.mutation.sql import SqlMutation, finditer, outside_quotes, replace, state_literal

# A string is Lua (a script, or a fragment of one) when it calls Redis or reads the script's arguments.
LUA_WORDS = re.compile(r"redis\.call\(|\bARGV\[|\bKEYS\[")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def is_lua(text: str) -> bool:
    return bool(LUA_WORDS.search(text))


def _outside_quotes(text: str) -> list[bool]:
    return outside_quotes(text, _QUOTED)


def _finditer(pattern: str, text: str) -> Iterator[re.Match[str]]:
    return finditer(pattern, text, _QUOTED)


_RELATIONAL = {"<=": "<", ">=": ">", "<": "<=", ">": ">=", "==": "~=", "~=": "=="}


def relational(text: str) -> Iterator[SqlMutation]:
    for m in _finditer(r"<=|>=|==|~=|<|>", text):
        new = _RELATIONAL[m.group()]
        yield "relational", f"{m.group()} -> {new}", replace(text, m.start(), m.end(), new)


def boolean(text: str) -> Iterator[SqlMutation]:
    for m in _finditer(r"\b(and|or)\b", text):
        new = "or" if m.group() == "and" else "and"
        yield "boolean", f"{m.group()} -> {new}", replace(text, m.start(), m.end(), new)


_CHAIN_START = re.compile(r"\b(if|elseif|while|return|not)\s+|(?<![=~<>])=(?!=)\s*|\(")
_CHAIN_END = re.compile(r"\s+(then|do)\b|\)")


def drop_conjunct(text: str) -> Iterator[SqlMutation]:
    """Each operand of an ``and`` chain made ``true``, of an ``or`` chain ``false``: a condition dropped. A
    chain is the operands joined by one kind of keyword at one parenthesis depth on one line, from its
    opening parenthesis (or ``if``, ``return``, ``=``, ...) to its closing one (or ``then``)."""
    offset = 0
    for line in text.splitlines(keepends=True):
        yield from ((name, what, text[:offset] + new + text[offset + len(line) :]) for name, what, new in _chains(line))
        offset += len(line)


def _chains(line: str) -> Iterator[SqlMutation]:
    mask, depth, depths = _outside_quotes(line), 0, []
    for ch, outside in zip(line, mask, strict=True):
        if outside and ch == ")":
            depth -= 1
        depths.append(depth)
        if outside and ch == "(":
            depth += 1
    groups: dict[int, list[re.Match[str]]] = {}
    for m in _finditer(r"\b(and|or)\b", line):
        # the group: the keywords at this depth since the last opening parenthesis below it
        level = depths[m.start()]
        opened = max((i for i in range(m.start()) if depths[i] < level), default=-1)
        groups.setdefault(opened, []).append(m)
    for opened, keywords in groups.items():
        if len({k.group() for k in keywords}) != 1:
            continue  # and and or mixed: dropping one operand would change the precedence, not just a condition
        level = depths[keywords[0].start()]
        begin = opened + 1
        if opened < 0:
            starts = [m.end() for m in _finditer(_CHAIN_START.pattern, line[: keywords[0].start()])
                      if depths[m.start()] == level]  # fmt: skip
            begin = max(starts, default=len(line) - len(line.lstrip()))
        tail = keywords[-1].end()
        # its closing parenthesis is one level out; ``then`` or ``do`` on its own level
        ends = [tail + m.start() for m in _CHAIN_END.finditer(line[tail:])
                if depths[tail + m.start()] == level - (m.group() == ")")]  # fmt: skip
        finish = min(ends, default=len(line.rstrip("\n")))
        cuts = [begin, *(x for k in keywords for x in (k.start(), k.end())), finish]
        word = "true" if keywords[0].group() == "and" else "false"
        for a, b in zip(cuts[::2], cuts[1::2], strict=True):
            operand = line[a:b].strip()
            if operand and operand.count("(") == operand.count(")"):
                yield ("drop-conjunct", f"{keywords[0].group()} ... {operand} dropped",
                       replace(line, a, b, f" {word} " if a > begin else f"{word} "))  # fmt: skip


def not_dropped(text: str) -> Iterator[SqlMutation]:
    for m in _finditer(r"\bnot\s+", text):
        yield "not-dropped", "a `not` dropped", replace(text, m.start(), m.end(), "")


def int_literal(text: str) -> Iterator[SqlMutation]:
    for m in _finditer(r"(?<![\w.\[%])\d+(?![\w.\]])", text):
        n = int(m.group())
        for new in (n - 1, n + 1):
            yield "int", f"{n} -> {new}", replace(text, m.start(), m.end(), str(new))


def drop_call(text: str) -> Iterator[SqlMutation]:
    """Each ``redis.call(...)`` that stands as a statement (not inside an expression), removed."""
    for m in _finditer(r"(?:(?<=\n)|^|(?<=\) )|(?<=then )|(?<=else ))[ \t]*redis\.call\(", text):
        start = m.start() + len(m.group()) - len(m.group().lstrip())
        depth, end = 0, start
        mask = _outside_quotes(text)
        while end < len(text):
            if mask[end] and text[end] == "(":
                depth += 1
            elif mask[end] and text[end] == ")":
                depth -= 1
                if depth == 0:
                    end += 1
                    break
            end += 1
        if text[:start].strip() or text[end:].strip():  # a call alone is an expression handed to a builder
            yield "drop-call", f"{text[start:end]} dropped", replace(text, start, end, "")


OPERATORS: tuple[Callable[[str], Iterator[SqlMutation]], ...] = (
    drop_conjunct, relational, boolean, not_dropped, state_literal, int_literal, drop_call,
)  # fmt: skip


def mutations(text: str) -> Iterator[SqlMutation]:
    """Every mutation of one Lua string, operator by operator, each in the order of its sites."""
    if not is_lua(text):
        return
    for op in OPERATORS:
        for name, what, new in op(text):
            if new != text:
                yield name, what, new

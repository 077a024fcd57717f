"""Mutation operators on SQL text: each takes one statement (a string constant of the queue's module)
and yields every mutated version of it, one per applicable site, in the order the sites appear.

Why operators of our own rather than a mutation tool's: mutmut and cosmic-ray mutate Python
syntax only, and a lease queue's logic lives mostly in its SQL (the WHERE that fences a finish, the
``generation + 1`` of a claim, the ``OR IGNORE`` of a registration). The operators are generic:
each is a pattern of SQL (a relational operator, a WHERE conjunct, a quoted state literal, an
integer literal, an ORDER BY, a RETURNING, a locking clause ...) and every place it matches is
mutated, whatever the statement means. Nothing here knows which statement is which.

An operator yields ``(name, description, new_text)``; the generator numbers them per site and
operator (``drop-conjunct-1``, ``drop-conjunct-2`` ...), so the ids are stable for a given source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from takeover.contract import STATES

SqlMutation = tuple[str, str, str]  # (operator, what it did in words, the new text)

# A string is SQL when it holds one of these words as a statement or clause keyword; the operators
# below also apply to a fragment such as ``generation + 1`` (a claim's bump handed to a builder).
SQL_WORDS = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE|CREATE|BEGIN|WHERE|RETURNING)\b|\w+ [+-] \d+\b")
# Where a WHERE clause ends (at its own parenthesis depth).
_CLAUSE_END = re.compile(r"\s+(ORDER BY|LIMIT|RETURNING|FOR UPDATE|ON CONFLICT|GROUP BY)\b")
_QUOTED = re.compile(r"'(?:[^']|'')*'")


def is_sql(text: str) -> bool:
    return bool(SQL_WORDS.search(text))


def outside_quotes(text: str, quoted: re.Pattern[str] = _QUOTED) -> list[bool]:
    """For each character: True when it is not inside a quoted string literal (SQL's, or ``quoted``'s:
    takeover.mutation.lua passes Lua's)."""
    mask = [True] * len(text)
    for m in quoted.finditer(text):
        for i in range(m.start(), m.end()):
            mask[i] = False
    return mask


def finditer(pattern: str, text: str, quoted: re.Pattern[str] = _QUOTED) -> Iterator[re.Match[str]]:
    """Matches of ``pattern`` that start outside quoted literals."""
    mask = outside_quotes(text, quoted)
    for m in re.finditer(pattern, text):
        if mask[m.start()]:
            yield m


def replace(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def _where_clauses(text: str) -> Iterator[tuple[int, int]]:
    """The (start, end) of the condition of every WHERE clause, nested ones included."""
    for m in finditer(r"\bWHERE\s+", text):
        start = m.end()
        depth, i = 0, start
        end = len(text)
        mask = outside_quotes(text)
        while i < len(text):
            c = text[i]
            if mask[i] and c == "(":
                depth += 1
            elif mask[i] and c == ")":
                if depth == 0:
                    end = i
                    break
                depth -= 1
            elif depth == 0 and mask[i]:
                stop = _CLAUSE_END.match(text, i)
                if stop and (i == 0 or text[i].isspace()):
                    end = i
                    break
            i += 1
        yield start, end


def _conjuncts(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The top-level ``AND`` operands of the condition text[start:end]."""
    parts, depth, last = [], 0, start
    mask = outside_quotes(text)
    i = start
    while i < end:
        c = text[i]
        if mask[i] and c == "(":
            depth += 1
        elif mask[i] and c == ")":
            depth -= 1
        elif depth == 0 and mask[i] and text.startswith(" AND ", i):
            parts.append((last, i))
            last = i + len(" AND ")
            i = last
            continue
        i += 1
    parts.append((last, end))
    return [(a, b) for a, b in parts if text[a:b].strip()]


def drop_conjunct(text: str) -> Iterator[SqlMutation]:
    """Each WHERE conjunct made always true (``(c OR 1=1)``): the condition is gone, its placeholders stay
    bound, so the statement still runs."""
    for start, end in _where_clauses(text):
        for a, b in _conjuncts(text, start, end):
            cond = text[a:b].strip()
            if cond.count("(") != cond.count(")"):
                continue  # a fragment of a statement built around it (an f-string's part): not a whole condition
            yield "drop-conjunct", f"WHERE ... {cond} dropped", replace(text, a, b, f"({cond} OR 1=1)")


_RELATIONAL = {"<=": "<", ">=": ">", "<": "<=", ">": ">="}


def relational(text: str) -> Iterator[SqlMutation]:
    """``<`` <-> ``<=`` and ``>`` <-> ``>=``, at each comparison."""
    for m in finditer(r"(?<![<>!-])(<=|>=|<(?![>=])|>(?!=))", text):
        new = _RELATIONAL[m.group(1)]
        yield "relational", f"{m.group(1)} -> {new}", replace(text, m.start(), m.end(), new)


def state_literal(text: str) -> Iterator[SqlMutation]:
    """Each quoted state literal swapped for each other state."""
    pattern = "'(" + "|".join(STATES) + ")'"
    for m in re.finditer(pattern, text):
        for other in STATES:
            if other != m.group(1):
                yield "state", f"'{m.group(1)}' -> '{other}'", replace(text, m.start(), m.end(), f"'{other}'")


def int_literal(text: str) -> Iterator[SqlMutation]:
    """Each integer literal off by one, both ways (``generation + 1`` -> ``+ 0``/``+ 2``, ``LIMIT 1``,
    a ``VALUES (..., 0, ...)``)."""
    for m in finditer(r"(?<![\w.%])\d+(?![\w.])", text):
        n = int(m.group())
        for new in (n - 1, n + 1):
            yield "int", f"{n} -> {new}", replace(text, m.start(), m.end(), str(new))


_PLACEHOLDER = r"(\?|%\(\w+\)s)"


def lease_arith(text: str) -> Iterator[SqlMutation]:
    """A lease set from a placeholder (``lease_until = ?``) a second off, both ways."""
    for m in finditer(r"\blease_until = " + _PLACEHOLDER, text):
        for sign in ("+", "-"):
            new = f"lease_until = {m.group(1)} {sign} 1"
            yield "lease-arith", f"{m.group()} -> {new}", replace(text, m.start(), m.end(), new)


_COLUMNS = re.compile(r"INTO\s+\w+\s*\(([^)]*)\)")


def upsert(text: str) -> Iterator[SqlMutation]:
    """An insert that ignores a known key made one that overwrites it: ``OR IGNORE`` -> ``OR REPLACE``
    and -> an upsert; ``ON CONFLICT (k) DO NOTHING`` -> ``DO UPDATE`` of every other inserted column."""
    cols = _COLUMNS.search(text)
    names = [c.strip() for c in cols.group(1).split(",")] if cols else []
    for m in finditer(r"\bINSERT OR IGNORE\b", text):
        yield "or-replace", "INSERT OR IGNORE -> INSERT OR REPLACE", replace(text, m.start(), m.end(),
                                                                             "INSERT OR REPLACE")
        if len(names) > 1:
            sets = ", ".join(f"{c} = excluded.{c}" for c in names[1:])
            new = replace(text, m.start(), m.end(), "INSERT").rstrip() + f" ON CONFLICT DO UPDATE SET {sets}"
            yield "upsert", "INSERT OR IGNORE -> an upsert of every other column", new
    for m in finditer(r"\bON CONFLICT \((\w+)\) DO NOTHING\b", text):
        others = [c for c in names if c != m.group(1)]
        if others:
            sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in others)
            yield "upsert", "ON CONFLICT DO NOTHING -> DO UPDATE of every other column", replace(
                text, m.start(), m.end(), f"ON CONFLICT ({m.group(1)}) DO UPDATE SET {sets}")


def returning(text: str) -> Iterator[SqlMutation]:
    """A RETURNING clause dropped."""
    for m in finditer(r"\s+RETURNING\s+[^()]*?(?=\)|$)", text):
        yield "drop-returning", "RETURNING dropped", replace(text, m.start(), m.end(), "")


def order_by(text: str) -> Iterator[SqlMutation]:
    """An ORDER BY dropped, or reversed (``DESC``)."""
    for m in finditer(r"\s+ORDER BY\s+([\w.]+)(\s+(?:ASC|DESC))?(?=\s+LIMIT|\s+FOR|\s+ON|\)|$)", text):
        yield "drop-order-by", f"ORDER BY {m.group(1)} dropped", replace(text, m.start(), m.end(), "")
        if not m.group(2):
            yield "order-desc", f"ORDER BY {m.group(1)} -> DESC", replace(text, m.end(1), m.end(1), " DESC")


def locking(text: str) -> Iterator[SqlMutation]:
    """Row locking weakened: ``FOR UPDATE SKIP LOCKED`` dropped, or only its ``SKIP LOCKED``; a
    ``BEGIN IMMEDIATE`` made a deferred ``BEGIN``; an ``INDEXED BY`` hint dropped."""
    for m in finditer(r"\s+FOR UPDATE( SKIP LOCKED)?", text):
        yield "drop-for-update", f"{m.group().strip()} dropped", replace(text, m.start(), m.end(), "")
        if m.group(1):
            yield "drop-skip-locked", "SKIP LOCKED dropped", replace(text, m.start(1), m.end(1), "")
    for m in finditer(r"\bBEGIN IMMEDIATE\b", text):
        yield "begin-deferred", "BEGIN IMMEDIATE -> BEGIN", replace(text, m.start(), m.end(), "BEGIN")
    for m in finditer(r"\s+INDEXED BY \w+", text):
        yield "drop-indexed-by", f"{m.group().strip()} dropped", replace(text, m.start(), m.end(), "")


def min_max(text: str) -> Iterator[SqlMutation]:
    """``MAX`` <-> ``MIN`` and ``GREATEST`` <-> ``LEAST``."""
    swap = {"MAX": "MIN", "MIN": "MAX", "GREATEST": "LEAST", "LEAST": "GREATEST"}
    for m in finditer(r"\b(MAX|MIN|GREATEST|LEAST)\(", text):
        new = swap[m.group(1)]
        yield "min-max", f"{m.group(1)} -> {new}", replace(text, m.start(1), m.end(1), new)


OPERATORS: tuple[Callable[[str], Iterator[SqlMutation]], ...] = (
    drop_conjunct, relational, state_literal, int_literal, lease_arith, upsert, returning, order_by, locking,
    min_max,
)


def mutations(text: str) -> Iterator[SqlMutation]:
    """Every mutation of one SQL string, operator by operator, each in the order of its sites."""
    if not is_sql(text):
        return
    for op in OPERATORS:
        for name, what, new in op(text):
            if new != text:
                yield name, what, new

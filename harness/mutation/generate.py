"""Mutants of a queue module, generated mechanically from its source: Python AST mutations and SQL
mutations of its string constants, every applicable site, in a deterministic order with stable ids.

Why generated and not written: a mutation score is the honest measure of a harness's power only when
nobody chose the bugs. The operators are generic (a relational operator changed, ``and`` <-> ``or``, a
constant off by one, a transaction removed so its statements autocommit one by one, an early return,
the SQL operators of :mod:`takeover.mutation.sql` and the Lua ones of :mod:`takeover.mutation.lua`, for
a Redis queue's scripts); each is applied at every site it fits, one site per mutant. What is mutated: the
module's functions and constants, and the body of the queue class named by ``MODULE:ATTR`` with the classes
it inherits from in the same module; another class's body is not (nothing the queue runs is there), nor
docstrings, annotations, imports or the messages of ``raise`` statements.

A mutant's id is ``<module>:<site>:<operator>-<n>``: the module's last name, the site (a constant's
name without its leading underscore, ``RESOLVE.done`` for a dict's value, ``Class.method`` for code),
the operator and its count at that site (``sqlite_lease:FINISH:drop-conjunct-3``). The same source
gives the same list. The mutant's source is the mutated tree unparsed (comments are gone, which
changes nothing a queue does); two mutations that give the same source are one mutant (the first).

Why not mutmut or cosmic-ray: both mutate Python syntax only and run their own test runner on the
package in place; a queue's logic is mostly SQL, and each mutant here must be a module of its own
(written to a temp folder, loaded as ``MODULE:ATTR`` by worker processes) so the package is never
edited. Their Python operators are the classic ones, which this module applies with the stdlib ``ast``.
"""

from __future__ import annotations

import ast
import copy
import difflib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from takeover._internal import locate
from takeover.errors import UsageError
from takeover.mutation import lua, sql

# The SQLite helper whose BEGIN is IMMEDIATE (takeover._internal.sqlite_util): the "begin-deferred" operator swaps
# it for a subclass that BEGINs deferred, appended to the mutant as SHIM.
IMMEDIATE_HELPER = "write_transaction"
# The operators that weaken what keeps two calls apart (a transaction, SQLite's write lock taken up front, a row
# lock): their mutants show only when calls overlap. Every other operator makes a logic mutant.
CONCURRENCY_OPERATORS = ("no-transaction", "begin-deferred", "drop-for-update", "drop-skip-locked")
DEFERRED_HELPER = "_mutant_deferred_transaction"
SHIM = f'''

class {DEFERRED_HELPER}({IMMEDIATE_HELPER}):
    """Mutation shim: {IMMEDIATE_HELPER} with a deferred BEGIN instead of BEGIN IMMEDIATE."""

    def __enter__(self):
        self.conn.execute("BEGIN")
        return self.conn
'''

_SWAP_CMP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}  # fmt: skip
_SWAP_BIN: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
_SYMBOL: dict[type[ast.AST], str] = {
           ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
           ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
           ast.Div: "/", ast.And: "and", ast.Or: "or"}  # fmt: skip

Path_ = tuple[tuple[str, int | None], ...]  # from the module down to a node: (field, index in a list or None)


@dataclass(frozen=True)
class Mutant:
    """One mutant: what was changed, where, and the module's whole mutated source."""

    id: str
    module: str  # the original module's dotted name
    attr: str  # the queue class (or factory) in it
    site: str
    operator: str
    what: str  # the change in words
    line: int  # in the original source
    source: str
    diff: str  # unified diff of the unparsed original and the mutant (the changed lines)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "site": self.site, "operator": self.operator, "what": self.what, "line": self.line,
                "diff": self.diff}


@dataclass(frozen=True)
class _Edit:
    site: str
    operator: str
    what: str
    line: int
    path: Path_
    nodes: tuple[ast.AST, ...]  # replaces the node at ``path`` (spliced when it sits in a list)
    shim: bool = False


def module_source(module: str) -> str:
    """The source of an importable module, without importing it. UsageError when there is none."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"cannot find queue module {module!r}: {exc}") from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise UsageError(f"cannot find the source of queue module {module!r} (a .py file is needed to mutate it)")
    return Path(spec.origin).read_text(encoding="utf-8")


def generate(spec: str, source: str | None = None) -> list[Mutant]:
    """Every mutant of the queue ``MODULE:ATTR`` (its module's source, or ``source``), in a stable order."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise UsageError(f"queue must be MODULE:ATTR, got {spec!r}")
    if source is None:
        locate.cwd_first(spec)  # a module in the current folder, found as stress finds it (python -m's rule)
    text = module_source(module) if source is None else source
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise UsageError(f"queue module {module!r} does not parse: {exc}") from None
    if not any(isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == attr for n in tree.body):
        raise UsageError(f"queue module {module!r} defines no top-level class or function {attr!r}")
    original = ast.unparse(tree)
    short = module.rpartition(".")[2]
    counts: dict[tuple[str, str], int] = {}
    seen = {original}
    mutants = []
    for edit in _edits(tree, _reachable(tree, attr)):
        new = _unparse_with(tree, edit) + (SHIM if edit.shim else "")
        key = (edit.site, edit.operator)
        counts[key] = counts.get(key, 0) + 1
        if new in seen:
            continue
        seen.add(new)
        mid = f"{short}:{edit.site}:{edit.operator}-{counts[key]}"
        mutants.append(Mutant(mid, module, attr, edit.site, edit.operator, edit.what, edit.line, new,
                              _diff(original, new)))
    return mutants


def _diff(original: str, new: str) -> str:
    lines = difflib.unified_diff(original.splitlines(), new.splitlines(), lineterm="", n=0)
    return "\n".join(line for line in lines if not line.startswith(("---", "+++", "@@")))


def _reachable(tree: ast.Module, attr: str) -> set[str]:
    """The class ``attr`` and the classes of the module it inherits from (transitively)."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    todo, found = [attr], set()
    while todo:
        name = todo.pop()
        if name in found or name not in classes:
            continue
        found.add(name)
        todo += [b.id for b in classes[name].bases if isinstance(b, ast.Name)]
    return found


def _unparse_with(tree: ast.Module, edit: _Edit) -> str:
    """The source of ``tree`` with ``edit`` made, the tree left as it was (edited in place and restored:
    a deep copy of the module per mutant costs more than everything else here)."""
    parent: Any = tree
    for field, index in edit.path[:-1]:
        parent = getattr(parent, field) if index is None else getattr(parent, field)[index]
    field, index = edit.path[-1]
    if index is None:
        before = getattr(parent, field)
        setattr(parent, field, edit.nodes[0])
        try:
            return ast.unparse(tree)
        finally:
            setattr(parent, field, before)
    body = getattr(parent, field)
    saved = body[index]
    body[index:index + 1] = list(edit.nodes)
    try:
        return ast.unparse(tree)
    finally:
        body[index:index + len(edit.nodes)] = [saved]


# -- where the operators apply -------------------------------------------------------------------------------
def _edits(tree: ast.Module, classes: set[str]) -> Iterator[_Edit]:
    for i, stmt in enumerate(tree.body):
        path: Path_ = (("body", i),)
        if isinstance(stmt, ast.ClassDef):
            if stmt.name in classes:
                for j, inner in enumerate(stmt.body):
                    yield from _statement(inner, (*path, ("body", j)), stmt.name + ".", j == 0)
        elif not isinstance(stmt, ast.Import | ast.ImportFrom):
            yield from _statement(stmt, path, "", i == 0)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _statement(stmt: ast.stmt, path: Path_, prefix: str, first: bool) -> Iterator[_Edit]:
    if first and _is_docstring(stmt):
        return
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        yield from _function(stmt, path, prefix + stmt.name)
    elif isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        name = next((t.id for t in targets if isinstance(t, ast.Name)), "module")
        if stmt.value is not None:
            yield from _expr(stmt.value, (*path, ("value", None)), name.lstrip("_"))


def _function(fn: ast.FunctionDef | ast.AsyncFunctionDef, path: Path_, site: str) -> Iterator[_Edit]:
    for k, default in enumerate(fn.args.defaults):
        yield from _expr(default, (*path, ("args", None), ("defaults", k)), site)
    yield from _block(fn.body, (*path,), "body", site, top=True)


def _block(body: list[ast.stmt], path: Path_, field: str, site: str, top: bool = False) -> Iterator[_Edit]:
    """A statement list inside a function: an early return before each statement, then each statement."""
    start = 1 if top and body and _is_docstring(body[0]) else 0
    for i in range(start, len(body)):
        here = (*path, (field, i))
        stmt = body[i]
        ret = ast.Return(value=None)
        yield _Edit(site, "early-return", f"return before line {stmt.lineno}", stmt.lineno, here, (ret, stmt))
        yield from _code(stmt, here, site)


def _code(stmt: ast.stmt, path: Path_, site: str) -> Iterator[_Edit]:
    """The mutations of one statement inside a function, and of the blocks nested in it."""
    if isinstance(stmt, ast.Raise):
        return  # its message is not behaviour; the raise itself is kept
    if isinstance(stmt, ast.With) and stmt.items:
        yield from _with(stmt, path, site)
    for field, value in ast.iter_fields(stmt):
        if field in ("body", "orelse", "finalbody") and isinstance(value, list):
            yield from _block(value, path, field, site)
        elif field == "handlers":
            for h, handler in enumerate(value):
                yield from _block(handler.body, (*path, ("handlers", h)), "body", site)
        elif field == "items":
            for k, item in enumerate(value):
                yield from _expr(item.context_expr, (*path, ("items", k), ("context_expr", None)), site)
        elif field in ("annotation", "returns", "type_comment", "decorator_list", "target", "targets"):
            continue  # not behaviour (annotations), or what is assigned to
        elif isinstance(value, ast.expr):
            yield from _expr(value, (*path, (field, None)), site)
        elif isinstance(value, list):
            for k, v in enumerate(value):
                if isinstance(v, ast.expr):
                    yield from _expr(v, (*path, (field, k)), site)


def _with(stmt: ast.With, path: Path_, site: str) -> Iterator[_Edit]:
    """A transaction's ``with`` removed (its statements autocommit one by one), or, for the SQLite helper,
    its ``BEGIN IMMEDIATE`` made a deferred ``BEGIN``."""
    item = stmt.items[0]
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if "transaction" not in name:
        return
    conn = call.args[0] if call.args else func.value if isinstance(func, ast.Attribute) else None
    if conn is None:
        return
    body: list[ast.stmt] = list(stmt.body)
    if item.optional_vars is not None:
        body.insert(0, ast.Assign(targets=[item.optional_vars], value=conn, lineno=stmt.lineno))
    yield _Edit(site, "no-transaction", f"the transaction of line {stmt.lineno} removed: each statement "
                f"autocommits", stmt.lineno, path, tuple(body))  # fmt: skip
    if isinstance(func, ast.Name) and func.id == IMMEDIATE_HELPER:
        new = copy.deepcopy(stmt)
        assert isinstance(new.items[0].context_expr, ast.Call)
        new.items[0].context_expr.func = ast.Name(id=DEFERRED_HELPER, ctx=ast.Load())
        yield _Edit(site, "begin-deferred", f"line {stmt.lineno}: BEGIN IMMEDIATE -> BEGIN", stmt.lineno, path,
                    (new,), shim=True)


def _expr(node: ast.expr, path: Path_, site: str) -> Iterator[_Edit]:
    """The mutations of an expression and of everything inside it, in source order."""
    line = getattr(node, "lineno", 0)
    if isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            swap = _SWAP_CMP.get(type(op))
            if swap is not None:
                new = copy.deepcopy(node)
                new.ops[k] = swap()
                yield _Edit(site, "relational", f"line {line}: {_SYMBOL[type(op)]} -> {_SYMBOL[swap]}", line, path,
                            (new,))  # fmt: skip
    elif isinstance(node, ast.BoolOp):
        new_op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield _Edit(site, "boolean", f"line {line}: {_SYMBOL[type(node.op)]} -> {_SYMBOL[type(new_op)]}", line,
                    path, (ast.BoolOp(op=new_op, values=copy.deepcopy(node.values)),))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield _Edit(site, "not-dropped", f"line {line}: a `not` dropped", line, path, (copy.deepcopy(node.operand),))
    elif isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
        arith = _SWAP_BIN[type(node.op)]
        yield _Edit(site, "arithmetic", f"line {line}: {_SYMBOL[type(node.op)]} -> {_SYMBOL[arith]}", line, path,
                    (ast.BinOp(left=copy.deepcopy(node.left), op=arith(), right=copy.deepcopy(node.right)),))
    elif isinstance(node, ast.Constant):
        yield from _constant(node, path, site, line)
    for field, value in ast.iter_fields(node):
        if field == "format_spec":
            continue
        if isinstance(value, ast.expr):
            yield from _expr(value, (*path, (field, None)), site)
        elif isinstance(value, list):
            for k, v in enumerate(value):
                if isinstance(v, ast.expr):
                    sub = site
                    if isinstance(node, ast.Dict) and field == "values":
                        key = node.keys[k]
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            sub = f"{site}.{key.value}"
                    yield from _expr(v, (*path, (field, k)), sub)


def _constant(node: ast.Constant, path: Path_, site: str, line: int) -> Iterator[_Edit]:
    value = node.value
    if isinstance(value, bool):
        yield _Edit(site, "constant", f"line {line}: {value} -> {not value}", line, path,
                    (ast.Constant(value=not value),))
    elif isinstance(value, int | float):
        for new in (value - 1, value + 1):
            yield _Edit(site, "constant", f"line {line}: {value!r} -> {new!r}", line, path, (ast.Constant(value=new),))
    elif isinstance(value, str):
        for operator, what, text in lua.mutations(value) if lua.is_lua(value) else sql.mutations(value):
            yield _Edit(site, operator, f"line {line}: {what}", line, path, (ast.Constant(value=text),))

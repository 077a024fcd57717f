"""The Lua mutation operators (takeover.mutation.lua): which mutants a script gives, exactly.

That every mutant of the Redis reference compiles on a real server, and that ``takeover mutate --db redis``
kills one, is tests/system/test_redis_queue.py's.
"""

from __future__ import annotations

from takeover.mutation import lua
from takeover.mutation.generate import generate

FENCE = "s[1] == 'running' and tonumber(s[2]) == tonumber(ARGV[2]) and tonumber(ARGV[3]) < tonumber(s[3])"
SCRIPT = """
local s = redis.call('HMGET', KEYS[1], 'state', 'generation')
if s[1] ~= 'uncertain' or tonumber(s[2]) ~= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done') redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""


def _by(operator: str, text: str) -> list[tuple[str, str]]:
    return [(what, new) for name, what, new in lua.mutations(text) if name == operator]


def test_only_lua_is_mutated_here() -> None:
    assert lua.is_lua(FENCE) and lua.is_lua(SCRIPT) and lua.is_lua("redis.call('HINCRBY', task, 'generation', 1)")
    assert not lua.is_lua("UPDATE tasks SET state = ? WHERE task_id = ?") and list(lua.mutations("a < b")) == []


def test_each_operand_of_an_and_chain_becomes_true_and_of_an_or_chain_false() -> None:
    assert [new for _, new in _by("drop-conjunct", FENCE)] == [
        "true and tonumber(s[2]) == tonumber(ARGV[2]) and tonumber(ARGV[3]) < tonumber(s[3])",
        "s[1] == 'running' and true and tonumber(ARGV[3]) < tonumber(s[3])",
        "s[1] == 'running' and tonumber(s[2]) == tonumber(ARGV[2]) and true ",
    ]
    lines = [new.splitlines()[2] for _, new in _by("drop-conjunct", SCRIPT)]
    assert lines == ["if false or tonumber(s[2]) ~= tonumber(ARGV[2]) then return 0 end",
                     "if s[1] ~= 'uncertain' or false  then return 0 end"]  # fmt: skip
    assert _by("drop-conjunct", "if a and b or c then return 1 end redis.call('GET', KEYS[1])") == []  # mixed


def test_comparisons_booleans_and_nots_are_flipped_outside_quotes() -> None:
    assert [what for what, _ in _by("relational", FENCE)] == ["== -> ~=", "== -> ~=", "< -> <="]
    assert [what for what, _ in _by("relational", "if x ~= '<=' then redis.call('GET', KEYS[1]) end")] == ["~= -> =="]
    assert [new for _, new in _by("boolean", FENCE)][0].startswith("s[1] == 'running' or tonumber")
    assert [new for _, new in _by("not-dropped", "if not (ARGV[1]) then return 0 end")] == [
        "if (ARGV[1]) then return 0 end"
    ]


def test_integers_are_off_by_one_but_argument_indexes_are_not_touched() -> None:
    assert [what for what, _ in _by("int", "redis.call('HINCRBY', KEYS[1], 'generation', 1)")] == ["1 -> 0", "1 -> 2"]
    assert _by("int", "return tonumber(ARGV[3]) < tonumber(s[3])") == []


def test_each_call_that_is_a_statement_is_dropped_and_a_call_alone_is_an_expression() -> None:
    dropped = [what for what, _ in _by("drop-call", SCRIPT)]
    assert dropped == ["redis.call('HSET', KEYS[1], 'state', 'done') dropped",
                       "redis.call('ZREM', KEYS[2], ARGV[1]) dropped"]  # fmt: skip
    assert _by("drop-call", "redis.call('HINCRBY', task, 'generation', 1)") == []  # `local gen = <this>`


def test_the_redis_reference_gets_lua_mutants_of_every_script() -> None:
    mutants = generate("takeover.queues.redis_lease:RedisLeaseQueue")
    lua_sites = {m.site for m in mutants if m.operator in ("drop-conjunct", "drop-call", "not-dropped", "boolean")}
    assert {"FENCE", "FINISH", "CLAIM", "EXTEND", "RESOLVE", "REGISTER", "CLEAR_LEASE"} <= lua_sites
    assert "redis_lease:FENCE:drop-conjunct-2" in {m.id for m in mutants}  # the generation fence

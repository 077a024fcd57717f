"""The contract's validators accept the shapes the contract allows and name what they refuse."""

from __future__ import annotations

import pytest

from takeover.contract import validate_claim_result, validate_finish_result, validate_snapshot
from takeover.errors import ContractError


def test_validators_accept_the_contract_shapes() -> None:
    assert validate_claim_result(None, "m:Q") is None
    assert validate_claim_result(("t", 3, 61), "m:Q") == ("t", 3, 61.0)
    assert validate_finish_result(False, "m:Q") is False
    assert validate_snapshot([("t", "pending", 0, None), ["u", "running", 2, 9]], "m:Q") == [
        ("t", "pending", 0, None),
        ("u", "running", 2, 9.0),
    ]


@pytest.mark.parametrize(
    "value",
    [("t", 1), ("t", "1", 2.0), (1, 1, 2.0), ("t", True, 2.0), ("t", 1, "soon"), 7],
)
def test_claim_validator_rejects_wrong_shapes(value: object) -> None:
    with pytest.raises(ContractError, match=r"claim\(\) returned"):
        validate_claim_result(value, "m:Q")


@pytest.mark.parametrize("value", [None, 1, "true"])
def test_finish_validator_rejects_non_bools(value: object) -> None:
    with pytest.raises(ContractError, match=r"finish\(\) returned"):
        validate_finish_result(value, "m:Q")


def test_bytes_from_a_redis_client_are_named_with_the_way_out() -> None:
    """redis-py answers bytes unless asked to decode: the line says so, for a claim and a snapshot row."""
    hint = r"not a str \(bytes: decode them; a Redis client answers bytes unless asked, redis-py with decode_responses"
    with pytest.raises(ContractError, match=r"claim\(\) returned task_id b't1', " + hint):
        validate_claim_result((b"t1", 1, 31.0), "m:Q")
    with pytest.raises(ContractError, match=r"snapshot\(\) row .*: task_id is " + hint):
        validate_snapshot([(b"t1", "done", 1, None)], "m:Q")
    with pytest.raises(ContractError, match=r"state b'done' is not one of .*\(bytes: decode them"):
        validate_snapshot([("t1", b"done", 1, None)], "m:Q")
    with pytest.raises(ContractError) as plain:
        validate_claim_result((7, 1, 31.0), "m:Q")
    assert "bytes" not in str(plain.value)  # only bytes get the hint

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

"""The shared op codec (``scenarios.codec``): the consumer and stream vocabularies decode
as strictly as the queue's, with messages that name the operation and the field."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.scenarios.codec import Field, OpCodec, OpDecodeError, OpEncodeError, decode_str
from rmqsim.scenarios.consumer.ops import (
    Pull,
    consumer_op_from_json,
    consumer_op_to_json,
    consumer_outcome_from_json,
)
from rmqsim.scenarios.queue.ops import CreateTopic, op_to_json
from rmqsim.scenarios.stream.ops import (
    Consume,
    stream_op_from_json,
    stream_op_to_json,
    stream_outcome_from_json,
)

_PRODUCE = {"kind": "stream_produce", "producer": "p"}


@pytest.mark.parametrize(
    ("decode", "obj", "message"),
    [
        (consumer_op_from_json, {"kind": "pull"}, "op(pull): missing field(s) client"),
        (
            consumer_op_from_json,
            {"kind": "pull", "client": "c", "zz": 1},
            "op(pull): unexpected field(s) zz",
        ),
        (
            consumer_op_from_json,
            {"kind": "pull", "client": {"b64": "!!"}},
            "op(pull).client: not valid base64: '!!'",
        ),
        (
            consumer_op_from_json,
            {"kind": "produce_batch", "topic": "t", "payloads": [1.5]},
            "op(produce_batch).payloads: not plain outcome data: 1.5",
        ),
        (stream_op_from_json, {"kind": "stream_consume"}, "op(stream_consume): missing field(s)"),
        (
            stream_op_from_json,
            {**_PRODUCE, "msgs": [[400, 1, 0, [1], {"b64": ""}]]},
            "op(stream_produce).msgs[0]: msg: expected a list of 6 fields",
        ),
        (
            stream_op_from_json,
            {"kind": "stream_consume", "consumer": {}},
            "op(stream_consume).consumer: not plain outcome data",
        ),
    ],
)
def test_consumer_and_stream_errors_name_the_operation_and_the_field(
    decode: Any, obj: object, message: str
) -> None:
    with pytest.raises(OpDecodeError) as caught:
        decode(obj)
    assert str(caught.value).startswith(message), str(caught.value)


@pytest.mark.parametrize(
    ("decode", "known"),
    [(consumer_op_from_json, "'start_client'"), (stream_op_from_json, "'stream_seek'")],
)
def test_an_unknown_or_missing_kind_says_which_kinds_there_are(decode: Any, known: str) -> None:
    with pytest.raises(OpDecodeError, match="known: ") as caught:
        decode({"kind": "explode"})
    assert known in str(caught.value)
    with pytest.raises(OpDecodeError, match=r"^op: missing field\(s\) kind$"):
        decode({"client": "c"})


@pytest.mark.parametrize("decode", [consumer_outcome_from_json, stream_outcome_from_json])
def test_plain_outcomes_name_the_field_too(decode: Any) -> None:
    with pytest.raises(OpDecodeError, match=r"^outcome: missing field\(s\) error$"):
        decode({"value": None})
    with pytest.raises(OpDecodeError, match=r"^outcome.value: not valid base64"):
        decode({"value": [{"b64": "!!"}], "error": None})


def test_an_operation_of_another_vocabulary_is_not_encoded() -> None:
    """The queue's codec refused a consumer operation; the consumer and stream codecs
    wrote any dataclass with a ``kind`` (a queue op became a consumer trace line)."""
    for encode, foreign in (
        (consumer_op_to_json, CreateTopic("t")),
        (stream_op_to_json, Pull("c")),
        (op_to_json, Consume("c")),
    ):
        with pytest.raises(OpEncodeError, match="not an operation of this vocabulary"):
            encode(foreign)


def test_a_vocabulary_without_a_field_spec_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match=r"no Field for \['topic'\]"):
        OpCodec("operation", {"create_topic": CreateTopic}, {"group": Field(decode_str)})

"""Child process of ``test_impl_sigkill``: produces and consumes forever, reporting on
stdout every operation that *returned*, until the parent kills it with SIGKILL.

Run as ``python sigkill_child.py DB_PATH``. Lines (each flushed):
``ready``; ``P <batch> <first_id> <last_id>`` after a produce returned; ``C <position>``
after a consume returned messages (the group's position is then at least that).
"""

from __future__ import annotations

import sys

from rmqsim.impl import RocksMQ
from rmqsim.model.api import MQConfig, ProducerMessage

CONFIG = MQConfig(page_size_bytes=3_000, retention_time_s=-1, retention_size_bytes=-1)
BATCH_MESSAGES = 7


def payload_for(batch: int, index: int) -> bytes:
    """Deterministic payloads of varied size, empty ones included."""
    size = (batch * 37 + index * 101) % 400
    return bytes([(batch + index) % 256]) * size


def properties_for(batch: int, index: int) -> dict[str, str]:
    return {"batch": str(batch), "index": str(index)} if index % 2 else {}


def main(path: str) -> None:
    mq = RocksMQ.open(path, CONFIG)
    mq.create_topic("t")
    if not mq.exist_consumer_group("t", "g"):
        mq.create_consumer_group("t", "g")
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    batch = 0
    while True:
        messages = [
            ProducerMessage(payload_for(batch, i), properties_for(batch, i))
            for i in range(BATCH_MESSAGES)
        ]
        ids = mq.produce("t", messages)
        out.write(f"P {batch} {ids[0]} {ids[-1]}\n")
        out.flush()
        if batch % 3 == 0:
            got = mq.consume("t", "g", 10)
            if got:
                out.write(f"C {got[-1].msg_id + 1}\n")
                out.flush()
        batch += 1


if __name__ == "__main__":
    main(sys.argv[1])

"""Implementations of the storage layer's contract (``model.store.api``): our commit log
through an adapter (``commitlog``). The real RocketMQ store is a driver in another process
(``impl/external/rocketmq_store/``)."""

from rmqsim.impl.store.commitlog import CommitLogStore, open_store

__all__ = ["CommitLogStore", "open_store"]

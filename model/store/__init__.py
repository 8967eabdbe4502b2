"""The storage layer's contract (``api``) and its reference model (``reference``):
docs/STORAGE.md "The storage contract"."""

from rmqsim.model.store.api import MessageStore, StoreConfig
from rmqsim.model.store.reference import QueueLog, ReferenceStore

__all__ = ["MessageStore", "QueueLog", "ReferenceStore", "StoreConfig"]

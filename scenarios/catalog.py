"""Every profile by name: the queue profiles (``profiles.PROFILES``), the consumer
profiles (``consumer_profiles.CONSUMER_PROFILES``) and the stream profiles
(``stream_profiles.STREAM_PROFILES``) and the storage profiles
(``store.profiles.STORE_PROFILES``). The tables know nothing of each other; this module
knows them all."""

from __future__ import annotations

from rmqsim.scenarios.consumer.profiles import CONSUMER_PROFILES, ConsumerProfile
from rmqsim.scenarios.queue.profiles import PROFILES, Profile, ProfileError, UnknownProfileError
from rmqsim.scenarios.store.profiles import STORE_PROFILES, StoreProfile
from rmqsim.scenarios.stream.profiles import STREAM_PROFILES, StreamProfile

__all__ = ["get_profile", "queue_profile"]


def get_profile(name: str) -> Profile | ConsumerProfile | StreamProfile | StoreProfile:
    """The profile called ``name`` (a queue profile, a consumer profile of
    ``consumer_profiles`` or a stream profile of ``stream_profiles``);
    ``UnknownProfileError`` lists the known names."""
    tables: tuple[dict[str, object], ...] = (PROFILES, CONSUMER_PROFILES, STREAM_PROFILES,
                                             STORE_PROFILES)  # type: ignore[assignment]
    for table in tables:
        try:
            return table[name]  # type: ignore[return-value]
        except (KeyError, TypeError):
            pass
    known = ", ".join([*PROFILES, *CONSUMER_PROFILES, *STREAM_PROFILES, *STORE_PROFILES])
    raise UnknownProfileError(f"unknown profile {name!r}; known profiles: {known}") from None


def queue_profile(name: str) -> Profile:
    """The queue profile called ``name``: as ``get_profile``, and a ``ProfileError`` for a
    consumer profile (whose runs are not a queue simulation's)."""
    profile = get_profile(name)
    if isinstance(profile, ConsumerProfile):
        raise ProfileError(f"{name!r} is a consumer profile; a queue profile is needed here")
    if isinstance(profile, StreamProfile):
        raise ProfileError(f"{name!r} is a stream profile; a queue profile is needed here")
    if isinstance(profile, StoreProfile):
        raise ProfileError(f"{name!r} is a storage profile; a queue profile is needed here")
    return profile

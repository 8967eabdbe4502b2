"""Every profile by name: the queue profiles (``profiles.PROFILES``), the consumer
profiles (``consumer_profiles.CONSUMER_PROFILES``) and the stream profiles
(``stream_profiles.STREAM_PROFILES``). The tables know nothing of each other; this module
knows them all."""

from __future__ import annotations

from rmqsim.scenarios.consumer_profiles import CONSUMER_PROFILES, ConsumerProfile
from rmqsim.scenarios.profiles import PROFILES, Profile, ProfileError, UnknownProfileError
from rmqsim.scenarios.stream_profiles import STREAM_PROFILES, StreamProfile

__all__ = ["get_profile", "queue_profile"]


def get_profile(name: str) -> Profile | ConsumerProfile | StreamProfile:
    """The profile called ``name`` (a queue profile, a consumer profile of
    ``consumer_profiles`` or a stream profile of ``stream_profiles``);
    ``UnknownProfileError`` lists the known names."""
    for table in (PROFILES, CONSUMER_PROFILES, STREAM_PROFILES):
        try:
            return table[name]
        except (KeyError, TypeError):
            pass
    known = ", ".join([*PROFILES, *CONSUMER_PROFILES, *STREAM_PROFILES])
    raise UnknownProfileError(f"unknown profile {name!r}; known profiles: {known}") from None


def queue_profile(name: str) -> Profile:
    """The queue profile called ``name``: as ``get_profile``, and a ``ProfileError`` for a
    consumer profile (whose runs are not a queue simulation's)."""
    profile = get_profile(name)
    if isinstance(profile, ConsumerProfile):
        raise ProfileError(f"{name!r} is a consumer profile; a queue profile is needed here")
    if isinstance(profile, StreamProfile):
        raise ProfileError(f"{name!r} is a stream profile; a queue profile is needed here")
    return profile

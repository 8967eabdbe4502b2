"""Every profile by name: the queue profiles (``profiles.PROFILES``) and the consumer
profiles (``consumer_profiles.CONSUMER_PROFILES``). The two tables know nothing of each
other; this module knows both."""

from __future__ import annotations

from rmqsim.scenarios.consumer_profiles import CONSUMER_PROFILES, ConsumerProfile
from rmqsim.scenarios.profiles import PROFILES, Profile, ProfileError, UnknownProfileError

__all__ = ["get_profile", "queue_profile"]


def get_profile(name: str) -> Profile | ConsumerProfile:
    """The profile called ``name`` (a queue profile, or a consumer profile of
    ``consumer_profiles``); ``UnknownProfileError`` lists the known names."""
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        pass
    try:
        return CONSUMER_PROFILES[name]
    except (KeyError, TypeError):
        known = ", ".join([*PROFILES, *CONSUMER_PROFILES])
        raise UnknownProfileError(f"unknown profile {name!r}; known profiles: {known}") from None


def queue_profile(name: str) -> Profile:
    """The queue profile called ``name``: as ``get_profile``, and a ``ProfileError`` for a
    consumer profile (whose runs are not a queue simulation's)."""
    profile = get_profile(name)
    if isinstance(profile, ConsumerProfile):
        raise ProfileError(f"{name!r} is a consumer profile; a queue profile is needed here")
    return profile

"""The user's adapter: rmqsim's RocksMQ, opened from a module that also uses the project's
own ``model`` package (both live side by side)."""

from model import OWNER


def open_queue(*, path, config, clock, faults):
    from rmqsim.impl import RocksMQ

    assert OWNER == "install_project"
    return RocksMQ.open(path, config=config, clock=clock, faults=faults)

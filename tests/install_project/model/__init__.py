"""The user project's own ``model`` package: a name rmqsim must leave alone."""

OWNER = "install_project"

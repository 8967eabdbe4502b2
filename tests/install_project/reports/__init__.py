"""The user project's own ``reports`` package: a name rmqsim must leave alone."""

OWNER = "install_project"

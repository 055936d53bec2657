"""CLI subcommands, one module per area, each with ``register(app)``. Keep them thin: parse options, call the
library, print."""

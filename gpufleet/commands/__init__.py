"""One thin module per `gpufleet` subcommand: its arguments, then one call into the package."""

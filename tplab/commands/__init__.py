"""One module per `tplab` subcommand (see tplab/cli.py for the contract)."""

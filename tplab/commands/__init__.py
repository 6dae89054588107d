"""One module per `tplab` subcommand (see tplab/commands/main.py for the contract)."""

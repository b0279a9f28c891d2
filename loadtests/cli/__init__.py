"""The command line, and the only code that sees argparse: parsers, flag types and commands. A command checks
its input, builds a typed request (run.RunRequest, controlplane.base.TargetRequest) and hands it down."""

"""`python -m relwrite`: the command line."""

from relwrite.cli import main

if __name__ == "__main__":  # not when a spawned worker process imports the main module again
    raise SystemExit(main())

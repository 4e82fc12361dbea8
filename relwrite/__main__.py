"""`python -m relwrite`: the command line."""

from relwrite.cli import main

raise SystemExit(main())

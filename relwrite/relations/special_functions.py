"""Special functions: stabilizations through log1mexp, erf and erfc, and the logs of sums of exps."""

"""relwrite: rewrite array-expression graphs with rules written as miniKanren relations."""

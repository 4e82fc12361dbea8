"""Bridges to other languages of expressions: FPBench's FPCore (`fpcore`)."""

"""Bridges to other languages of expressions: FPBench's FPCore (`fpcore`) and PyTensor graphs (`pytensor`,
with the optional extra relwrite[pytensor])."""

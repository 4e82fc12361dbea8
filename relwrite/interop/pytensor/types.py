"""Types and constants across the bridge: PyTensor's tensor and scalar types are relwrite's TensorType.

relwrite has no scalar layer: a PyTensor `ScalarType` (what Subtensor's
index inputs carry) is a 0-d tensor here, and a PyTensor 0-d tensor stays one.
Dtypes and static shapes carry over unchanged; a type relwrite has no
counterpart for (complex, slices, random generators) is a TypeError naming
the variable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.graph.basic import Constant as PtConstant
from pytensor.graph.basic import Variable as PtVariable
from pytensor.tensor.type import TensorType as PtTensorType

from relwrite.graph.basic import Constant, Variable
from relwrite.graph.types import TensorType


def relwrite_type(var: PtVariable) -> TensorType:
    """The relwrite type of a PyTensor variable (TypeError naming it when there is none)."""
    t = var.type
    if isinstance(t, PtTensorType):
        dtype, shape = t.dtype, t.shape
    elif isinstance(t, ps.ScalarType):
        dtype, shape = t.dtype, ()
    else:
        raise TypeError(f"PyTensor variable {var} of type {t} has no relwrite counterpart")
    try:
        return TensorType(dtype, shape)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"PyTensor variable {var} of type {t}: {exc}") from None


def relwrite_constant(var: PtConstant) -> Constant:
    """A PyTensor constant as a relwrite constant of the same dtype and static shape."""
    return Constant(relwrite_type(var), np.asarray(var.data), name=var.name)


def pytensor_type(t: TensorType) -> PtTensorType:
    return PtTensorType(t.dtype, shape=t.shape)


def pytensor_constant(c: Constant) -> PtVariable:
    """A relwrite constant as a PyTensor tensor constant with its dtype and (full) static shape."""
    return pt.constant(np.array(c.data), dtype=c.dtype, name=c.name)


def pytensor_input(var: Variable) -> PtVariable:
    """A fresh PyTensor input standing for a relwrite input of the same name and type."""
    return pytensor_type(var.type)(name=var.name)


def as_type(var: PtVariable, wanted: Any) -> PtVariable:
    """`var` as a value of the PyTensor type `wanted`: a 0-d tensor becomes a scalar where one is wanted."""
    if isinstance(wanted, ps.ScalarType) and isinstance(var.type, PtTensorType):
        return pt.scalar_from_tensor(var)
    if isinstance(wanted, PtTensorType) and isinstance(var.type, ps.ScalarType):
        return pt.tensor_from_scalar(var)
    return var

"""JSON that is JSON: NaN and infinities become null, numpy scalars plain numbers."""

from __future__ import annotations

import json
import math


def jsonable(value):
    """A JSON-ready copy of `value`."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return jsonable(value.item())
    return value


def dumps(value, **kwargs) -> str:
    return json.dumps(jsonable(value), allow_nan=False, default=str, **kwargs)

"""The OpenAPI document's head and shared schemas; the paths come from the endpoints'
docstrings (`starlette.schemas.SchemaGenerator`)."""

from __future__ import annotations

from .. import __version__

_LABELS = {"type": "array", "items": {"type": "string"}}
_METHOD = {
    "type": "string",
    "enum": ["dyn-ana", "dyn-gen", "sta-ana", "sta-gen"],
    "default": "dyn-ana",
}

BASE = {
    "openapi": "3.0.3",
    "info": {
        "title": "vpub serve",
        "version": __version__,
        "description": "Counting queries with guaranteed-safe result intervals (004) and the release catalog. No endpoint returns rows or group contents.",
    },
    "components": {
        "schemas": {
            "CountQuery": {
                "type": "object",
                "description": "where text (labels quoted as the condition language reads them), or ranges and/or sensitive (labels exactly as /statdb/schema lists them, no quoting); on the served attributes only",
                "properties": {
                    "where": {
                        "type": "string",
                        "example": "age between 30 and 50 and salary in (3, 4)",
                    },
                    "ranges": {
                        "type": "object",
                        "additionalProperties": {**_LABELS, "minItems": 2, "maxItems": 2},
                    },
                    "sensitive": _LABELS,
                    "method": _METHOD,
                },
            },
            "Interval": {
                "type": "object",
                "properties": {
                    "lower": {"type": "integer"},
                    "upper": {"type": "integer"},
                    "method": _METHOD,
                    "elapsed_ms": {"type": "number"},
                },
            },
            "Schema": {
                "type": "object",
                "properties": {
                    "qi": {"type": "object", "additionalProperties": _LABELS},
                    "sensitive": {"type": "object", "additionalProperties": _LABELS},
                    "rows": {"type": "integer"},
                    "m": {"type": "integer"},
                    "methods": _LABELS,
                },
            },
            "Error": {
                "type": "object",
                "description": "every error response, 4xx and 5xx",
                "properties": {
                    "error": {"type": "string"},
                    "field": {"type": "string", "nullable": True},
                },
            },
            "EstimateQuery": {
                "type": "object",
                "required": ["where"],
                "properties": {"where": {"type": "string", "example": "age between 30 and 50"}},
            },
        }
    },
}

"""The OpenAPI document's head and shared schemas; the paths come from the endpoints'
docstrings (`starlette.schemas.SchemaGenerator`)."""

from __future__ import annotations

from ..version import __version__

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
                "anyOf": [
                    {"required": ["where"]},
                    {"required": ["ranges"]},
                    {"required": ["sensitive"]},
                ],
                "description": "where text (labels quoted as the condition language reads them), or ranges and/or sensitive (labels exactly as /statdb/schema lists them, no quoting); on the served attributes only",
                "properties": {
                    "where": {
                        "type": "string",
                        "description": "a condition in the condition language",
                        "example": "age between 30 and 50 and salary in (3, 4)",
                    },
                    "ranges": {
                        "type": "object",
                        "description": "per QI attribute, the first and last label of a range",
                        "additionalProperties": {**_LABELS, "minItems": 2, "maxItems": 2},
                    },
                    "sensitive": {**_LABELS, "description": "the sensitive values counted"},
                    "method": {
                        **_METHOD,
                        "description": "A-Count `dyn-ana` (default), G-Count `dyn-gen`, or the static baselines `sta-ana`, `sta-gen` (004 §6, §7, §9)",
                    },
                    "version": {
                        "oneOf": [{"type": "integer"}, {"type": "string"}],
                        "description": "the store version asked, by number or id (default: the latest)",
                    },
                },
            },
            "Interval": {
                "type": "object",
                "description": "the result interval: the true count lies in [lower, upper]",
                "properties": {
                    "lower": {"type": "integer", "description": "the interval's lower end"},
                    "upper": {"type": "integer", "description": "the interval's upper end"},
                    "method": {**_METHOD, "description": "the method that computed it"},
                    "version": {"type": "integer", "description": "the store version answered"},
                    "elapsed_ms": {"type": "number", "description": "the server's time"},
                },
            },
            "Schema": {
                "type": "object",
                "description": "what a count may name",
                "properties": {
                    "qi": {
                        "type": "object",
                        "description": "each QI attribute's labels, in domain order",
                        "additionalProperties": _LABELS,
                    },
                    "sensitive": {
                        "type": "object",
                        "description": "the sensitive attribute's labels",
                        "additionalProperties": _LABELS,
                    },
                    "rows": {"type": "integer", "description": "the store's rows"},
                    "m": {"type": "integer", "description": "the store's m (m-invariance)"},
                    "posterior": {
                        "type": "boolean",
                        "description": "whether every posterior stays at 1/m against an "
                        "adversary who knows the algorithm (false: built with "
                        "marginals.assign: local-unsafe)",
                    },
                    "methods": {**_LABELS, "description": "the methods `method` accepts"},
                    "versions": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "description": "the store's versions, oldest first",
                    },
                },
            },
            "Error": {
                "type": "object",
                "description": "every error response, 4xx and 5xx",
                "properties": {
                    "error": {"type": "string", "description": "what went wrong, in one line"},
                    "field": {
                        "type": "string",
                        "nullable": True,
                        "description": "the request part at fault, or null",
                    },
                },
            },
            "EstimateQuery": {
                "type": "object",
                "required": ["where"],
                "description": "an estimate's condition, on the release's attributes",
                "properties": {
                    "where": {
                        "type": "string",
                        "description": "a condition in the condition language",
                        "example": "age between 30 and 50",
                    }
                },
            },
        }
    },
}

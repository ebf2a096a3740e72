#!/usr/bin/env python3
"""Validates the JSON files under networks/, profiles/ and plans/ against schemas/.

  python3 scripts/validate_json.py [ROOT]

Every *.json file found (recursively) under those folders of ROOT (default: the repository this
script is in; a folder that does not exist is skipped) is checked against
schemas/<kind>.schema.json, the kind chosen by the file's "format" field:
ucplan-network/1 -> network, ucplan-profile/1 -> profile, ucplan-plan/1 -> plan (networks/ holds
networks only: another format there is a failure). A missing network
schema is a failure; a missing profile or plan schema is reported and its files are skipped.
Every schemas/*.schema.json is registered under its "$id" (else its file URI), so a schema can
refer to another by file name ("$ref": "network.schema.json" in the plan schema).
Prints one line per failure (file, JSON path, message) and a summary line; exits 1 on any failure.
Needs the `jsonschema` package (JSON Schema draft 2020-12).
"""

import json
import os
import pathlib
import sys

try:
    import jsonschema
except ImportError:
    print("validate_json.py: the Python package jsonschema is missing (pip install jsonschema)", file=sys.stderr)
    sys.exit(2)
try:
    import referencing
    import referencing.jsonschema
except ImportError:  # jsonschema < 4.18: $ref between schema files goes through RefResolver
    referencing = None

FOLDERS = ("networks", "profiles", "plans")
KINDS = {"ucplan-network/1": "network", "ucplan-profile/1": "profile", "ucplan-plan/1": "plan"}
OPTIONAL_KINDS = {"profile", "plan"}  # their schemas may not be written yet


def json_path(path):
    """$.layers[3].kernel from a jsonschema error's absolute_path."""
    out = "$"
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def leaf_errors(error):
    """The most specific errors under a oneOf/anyOf/allOf failure, so the message names the field
    and the reason rather than "is not valid under any of the given schemas"."""
    if not error.context:
        return [error]
    best = jsonschema.exceptions.best_match(error.context)
    return leaf_errors(best) if best is not None else [error]


def schema_store(root):
    """{URI: schema} for every schemas/*.schema.json: the URI is its "$id", else its file URI."""
    store = {}
    folder = os.path.join(root, "schemas")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    for name in names:
        if name.endswith(".schema.json"):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                schema = json.load(f)
            uri = schema.get("$id") if isinstance(schema, dict) else None
            store[uri or pathlib.Path(path).as_uri()] = schema
    return store


def make_validator(cls, schema, store):
    """A validator of `schema` that resolves $ref to the other schemas in `store`."""
    if referencing is not None:
        registry = referencing.Registry().with_resources(
            (uri, referencing.Resource.from_contents(s, default_specification=referencing.jsonschema.DRAFT202012))
            for uri, s in store.items())
        return cls(schema, registry=registry)
    resolver = jsonschema.RefResolver.from_schema(schema, store=store)
    return cls(schema, resolver=resolver)


def main(argv):
    root = os.path.abspath(argv[1]) if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    validators = {}
    failures = 0
    checked = 0
    skipped = 0
    reported_missing = set()
    store = None

    def fail(rel, where, message):
        nonlocal failures
        failures += 1
        print(f"{rel}: {where}: {message}")

    def validator(kind):
        nonlocal store
        if kind not in validators:
            path = os.path.join(root, "schemas", f"{kind}.schema.json")
            if not os.path.isfile(path):
                validators[kind] = None
            else:
                with open(path, encoding="utf-8") as f:
                    schema = json.load(f)
                cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
                cls.check_schema(schema)
                if store is None:
                    store = schema_store(root)
                validators[kind] = make_validator(cls, schema, store)
        return validators[kind]

    files = []
    for folder in FOLDERS:
        top = os.path.join(root, folder)
        if not os.path.isdir(top):
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            files += [(folder, os.path.join(dirpath, fn)) for fn in sorted(filenames) if fn.endswith(".json")]

    for folder, path in files:
        rel = os.path.relpath(path, root)
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except json.JSONDecodeError as e:
            fail(rel, f"line {e.lineno} column {e.colno}", f"invalid JSON: {e.msg}")
            continue
        except (OSError, UnicodeDecodeError) as e:
            fail(rel, "$", f"cannot read: {e}")
            continue
        fmt = doc.get("format") if isinstance(doc, dict) else None
        kind = KINDS.get(fmt) if isinstance(fmt, str) else None
        if kind is None:
            fail(rel, "$.format", f"unknown format {json.dumps(fmt)} (expected one of {', '.join(KINDS)})")
            continue
        if folder == "networks" and kind != "network":
            fail(rel, "$.format", f"a {fmt} file in networks/, which holds ucplan-network/1 files only")
            continue
        v = validator(kind)
        if v is None:
            if kind in OPTIONAL_KINDS:
                if kind not in reported_missing:
                    print(f"note: schemas/{kind}.schema.json does not exist yet: {kind} files are not validated")
                    reported_missing.add(kind)
                skipped += 1
                continue
            fail(rel, "$", f"schemas/{kind}.schema.json is missing")
            continue
        checked += 1
        errors = sorted(v.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
        for e in errors:
            for leaf in leaf_errors(e):
                fail(rel, json_path(leaf.absolute_path), leaf.message)

    print(f"{checked} file(s) validated, {skipped} skipped (no schema), {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""MkDocs hooks (mkdocs.yml, ``hooks:``): the pages made at build time from
the repository's own files, so that none of them can drift.

- ``index.md`` is README.md, and ``SECURITY.md`` is SECURITY.md, each with its
  links to ``docs/PAGE.md`` turned into links to the site's pages;
- ``yaml-reference.md`` is rendered from the YAML format's JSON schema
  (``runner/schemas/runner.schema.json``): every key of every object, with its
  type, whether it is required, and the schema's own description. A schema
  keyword the renderer does not know stops the build, so a new kind of rule
  cannot be left out of the page unnoticed.

The pages in docs/ link to those two files as ``../README.md`` and
``../SECURITY.md`` (which works when reading docs/ on a forge, too); on the
site the links go to the generated pages. Any other link out of docs/ is left
as it is, and ``mkdocs build --strict`` refuses it.

Run it alone to print the reference page: ``python scripts/docs_hooks.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "runner" / "schemas" / "runner.schema.json"

#: Keywords render_schema understands; any other one in the schema is an error.
KNOWN_KEYWORDS = {
    "$schema", "$id", "$defs", "$ref", "title", "description", "type", "const", "enum",
    "properties", "required", "additionalProperties", "propertyNames", "items",
    "minItems", "uniqueItems", "minLength", "pattern", "minimum", "maximum",
    "exclusiveMinimum", "oneOf", "anyOf", "allOf", "if", "then", "else", "x-error",
}  # fmt: skip
#: The order of the sections; a definition not named here comes after them.
ORDER = [
    "agent", "environment", "network", "input", "secret", "consumers", "hook",
    "steps_hook", "uses_hook", "python_hook", "step", "run_step", "write_step",
    "save_step", "upload_step", "secret_file_step",
]  # fmt: skip


# --- the generated pages --------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    pages = {
        "index.md": site_links(read(ROOT / "README.md"), prefix="docs/"),
        "SECURITY.md": site_links(read(ROOT / "SECURITY.md"), prefix="docs/"),
        "yaml-reference.md": render_schema(json.loads(read(SCHEMA))),
    }
    for name, content in pages.items():
        files.append(File.generated(config, name, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """A docs page's links to README.md and SECURITY.md, as the site has them."""
    markdown = markdown.replace("](../README.md", "](index.md")
    return markdown.replace("](../SECURITY.md", "](SECURITY.md")


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def site_links(markdown: str, prefix: str) -> str:
    """A top-level file's links ``](docs/PAGE.md...)``, relative to the site's
    root, and its GitHub alerts (``> [!IMPORTANT]``) as admonitions."""
    return ALERT.sub(admonition, markdown.replace(f"]({prefix}", "]("))


ALERT = re.compile(r"^> \[!(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]\n((?:>.*\n)*)", re.MULTILINE)


def admonition(match: re.Match[str]) -> str:
    body = [line[2:] if line.startswith("> ") else line[1:] for line in match[2].splitlines()]
    return f"!!! {match[1].lower()}\n" + "".join(f"    {line}\n" for line in body)


# --- the YAML reference ----------------------------------------------------------


def render_schema(schema: dict[str, Any]) -> str:
    check_keywords(schema)
    definitions = schema["$defs"]
    order = [name for name in ORDER if name in definitions]
    order += sorted(set(definitions) - set(order))
    parts = [
        "# YAML reference",
        "Every key of a runner file, generated from the JSON schema that "
        "`runner validate` checks files against (`runner schema` prints it). "
        "[The YAML format](yaml.md) says how the parts work together; the "
        "[Shell rules](shell-rules.md), what a `run` step may do with a value.",
        section("Top level", "top-level", schema),
    ]
    chosen = chosen_by(definitions)
    parts += [
        section(f"`{name}`", anchor(name), definitions[name], chosen.get(name)) for name in order
    ]
    return "\n\n".join(parts) + "\n"


def check_keywords(node: Any, where: str = "#") -> None:
    """Every keyword of every subschema is one the renderer knows."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            check_keywords(item, f"{where}/{index}")
        return
    if not isinstance(node, dict):
        return
    unknown = set(node) - KNOWN_KEYWORDS
    if unknown:
        raise ValueError(f"{SCHEMA.name} {where}: keywords the reference cannot show: {unknown}")
    for key, value in node.items():
        if key in ("properties", "$defs"):
            for name, child in value.items():
                check_keywords(child, f"{where}/{key}/{name}")
        elif key not in ("enum", "const", "required"):
            check_keywords(value, f"{where}/{key}")


def anchor(name: str) -> str:
    return name.replace("_", "-")


def chosen_by(definitions: dict[str, Any]) -> dict[str, str]:
    """The definitions an if/then chain picks by a key (a run step by ``run``),
    by name: that key is required of them, though their own schema cannot say so."""
    found = {}
    for node in definitions.values():
        while "if" in node and "$ref" in node.get("then", {}):
            (key,) = node["if"]["required"]
            found[node["then"]["$ref"].rsplit("/", 1)[1]] = key
            node = node["else"]
    return found


def section(title: str, slug: str, node: dict[str, Any], chosen_by: str | None = None) -> str:
    lines = [f"## {title} {{#{slug}}}", ""]
    if "description" in node:
        lines += [node["description"], ""]
    if "properties" in node:
        lines.append(properties_table(node, chosen_by))
    elif "oneOf" in node:
        lines.append("One of:\n")
        for alternative in node["oneOf"]:
            text = f"- {describe(alternative)}"
            if "description" in alternative:
                text += f": {alternative['description']}"
            lines.append(text)
        for alternative in node["oneOf"]:
            if "properties" in alternative:
                lines += ["", f"{describe(alternative).capitalize()}:", ""]
                lines.append(properties_table(alternative))
    elif "if" in node:
        lines.append("Which one is meant is read from its keys:\n")
        lines += [f"- {text}" for text in branches(node)]
    else:
        lines.append(f"Type: {describe(node)}.")
    then = node.get("then", {})
    if "$ref" not in then and "properties" in then:
        condition = node["if"]["properties"]
        (key,) = condition
        lines += [
            "",
            f"When `{key}` is `{condition[key]['const']}`:",
            "",
            properties_table(then),
        ]
    for rule in node.get("allOf", []):
        if "x-error" in rule:
            lines += ["", f"Also: {rule['x-error']}."]
    return "\n".join(lines)


def branches(node: dict[str, Any]) -> list[str]:
    """The alternatives of an if/then/else chain: ``with run: a run_step``."""
    found = []
    while "if" in node:
        (key,) = node["if"]["required"]
        found.append(f"with `{key}:`, {describe(node['then'])}")
        node = node["else"]
    if "$ref" in node:
        found.append(f"otherwise, {describe(node)}")
    elif "x-error" in node:
        found.append(f"otherwise an error: {node['x-error']}")
    return found


def properties_table(node: dict[str, Any], chosen_by: str | None = None) -> str:
    required = set(node.get("required", [])) | ({chosen_by} if chosen_by else set())
    rows = ["| key | type | required | description |", "|---|---|---|---|"]
    for name, child in node["properties"].items():
        text = child.get("description", "")
        if "$ref" in child and not text:
            text = f"see {describe(child)}"
        rows.append(
            f"| `{name}` | {cell(describe(child))} | {'yes' if name in required else ''} "
            f"| {cell(text)} |"
        )
    if node.get("additionalProperties") is False:
        rows.append("\nNo other key is allowed.")
    for name, child in node["properties"].items():
        if "properties" in child:
            rows += ["", f"`{name}`:", "", properties_table(child)]
    return "\n".join(rows)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def describe(node: dict[str, Any]) -> str:
    """A short type: ``non-empty string``, ``list of [step](#step)``, ..."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        return f"[`{name}`](#{anchor(name)})"
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{value}`" for value in node["enum"])
    if "oneOf" in node:
        return " or ".join(describe(alternative) for alternative in node["oneOf"])
    kind = node.get("type", "any value")
    if kind == "array":
        text = f"list of {describe(node['items'])}"
        if node.get("minItems"):
            text += f" (at least {node['minItems']})"
        if node.get("uniqueItems"):
            text += ", no repeats"
        return text
    if kind == "object":
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            key = "name"
            if "propertyNames" in node:
                key = f"name matching `{node['propertyNames']['pattern']}`"
            return f"mapping of {key} to {describe(extra)}"
        if "properties" in node:
            keys = ", ".join(f"`{name}`" for name in node["properties"])
            return f"mapping with {keys}"
        return "mapping"
    words = [{"integer": "integer", "number": "number", "boolean": "boolean"}.get(kind, kind)]
    if node.get("minLength"):
        words.insert(0, "non-empty")
    limits = []
    if "minimum" in node:
        limits.append(f">= {node['minimum']}")
    if "exclusiveMinimum" in node:
        limits.append(f"> {node['exclusiveMinimum']}")
    if "maximum" in node:
        limits.append(f"<= {node['maximum']}")
    if "pattern" in node:
        limits.append(f"matching `{node['pattern']}`")
    return " ".join(words) + (f" ({', '.join(limits)})" if limits else "")


if __name__ == "__main__":
    print(render_schema(json.loads(read(SCHEMA))), end="")

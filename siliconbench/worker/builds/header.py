"""Can llama-cpp-python's binding drive this build's library? Read from the headers, never assumed.

The binding is ctypes over ``llama.h``: it binds functions by name with the argument and return types of the
``llama.h`` its release vendors, and lays out structs (``llama_model_params``, ``llama_context_params``, …)
field by field. A library whose ``llama.h`` declares one of those differently is undefined behaviour through the
binding: a crash, or parameters silently read from the wrong offsets. So a build is driven through a binding
only when, for **every function the binding binds** and **every struct it lays out**, the build's declaration
equals the one in the header the binding was written against (comments and whitespace aside), and every enum of
``llama.h`` (whose values the binding copies as constants) is the same. A function the binding binds that the
build does not declare also fails the check.

The binding's own header is its release's vendored ``include/llama.h`` (from the llama-cpp-python sdist: the
tools cache holds the pinned release's; ``binding_header`` fetches another's sdist once from the package index).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version as installed_version
from pathlib import Path

from siliconbench.contract.errors import UserError
from siliconbench.contract.settings import tools_cache_dir

FUNCTION = re.compile(r"ctypes_function\(\s*\"(\w+)\"")
STRUCT = re.compile(r"^class (\w+)\(ctypes\.(?:Structure|Union)\)", re.M)


@dataclass(frozen=True)
class Compatibility:
    binding: str  # the llama-cpp-python version checked against
    ok: bool
    checked: int  # declarations compared
    first_difference: str  # "" when ok: which declaration differs, and how
    differing: int  # how many of the checked declarations differ

    def as_dict(self) -> dict:
        return {
            "binding": self.binding,
            "compatible": self.ok,
            "declarations_checked": self.checked,
            "declarations_differing": self.differing,
            "first_difference": self.first_difference,
        }


def _strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    return text


# Spellings of one C type on every platform llama.cpp builds for (int is 32 bits on LP64 and LLP64 alike): a header
# that moved from one to the other did not change the ABI.
SAME_TYPE = {r"\bint32_t\b": "int", r"\buint32_t\b": "unsigned int"}


def _norm(decl: str) -> str:
    decl = re.sub(r"\s+", " ", decl).strip()
    for spelling, same in SAME_TYPE.items():
        decl = re.sub(spelling, same, decl)
    return re.sub(r"\s*([(),*;{}\[\]=])\s*", r"\1", decl)


def _block(text: str, start: int) -> int:
    """The index just past the brace block that opens at or after ``start``."""
    depth, i = 0, text.index("{", start)
    while True:
        c = text[i]
        depth += c == "{"
        depth -= c == "}"
        i += 1
        if depth == 0:
            return i


def declarations(header_text: str) -> dict[str, str]:
    """name -> normalized declaration, for every LLAMA_API function, struct and enum of a llama.h:
    ``fn:llama_decode``, ``struct:llama_model_params``, ``enum:llama_vocab_type``."""
    text = _strip(header_text)
    out: dict[str, str] = {}
    for kind in ("struct", "enum"):
        for m in re.finditer(rf"\b{kind}\s+(\w+)\s*\{{", text):
            end = _block(text, m.start())
            out.setdefault(f"{kind}:{m.group(1)}", _norm(text[m.start() : end]))
    for stmt in text.split(";"):
        if "LLAMA_API" not in stmt:
            continue
        stmt = stmt[stmt.index("LLAMA_API") :]
        m = re.search(r"(\w+)\s*\(", stmt)
        if not m:
            continue
        body = re.sub(r"\)\s*,\s*\"[^\"]*\"\s*\)\s*$", ")", stmt.strip())  # DEPRECATED(decl, "hint")
        out.setdefault(f"fn:{m.group(1)}", _norm(body))
    return out


def bound_by(binding_source: str) -> tuple[set[str], set[str]]:
    """(functions, structs) the binding's llama_cpp.py binds and lays out."""
    return set(FUNCTION.findall(binding_source)), set(STRUCT.findall(binding_source))


def compare(build_header: str, binding_header: str, binding_source: str, binding: str) -> Compatibility:
    """Whether the binding (its source and its own header) can drive a library with ``build_header``."""
    ours, theirs = declarations(build_header), declarations(binding_header)
    functions, structs = bound_by(binding_source)
    keys = sorted(
        {f"fn:{f}" for f in functions if f"fn:{f}" in theirs}
        | {f"struct:{s}" for s in structs if f"struct:{s}" in theirs}
        | {k for k in theirs if k.startswith("enum:")}
    )
    diffs = []
    for k in keys:
        kind, name = k.split(":", 1)
        if k not in ours:
            diffs.append(f"{kind} {name}: missing from the build's llama.h")
        elif kind == "enum":
            have = enum_members(ours[k])
            for member, value in enum_members(theirs[k]).items():
                if have.get(member) != value:
                    got = "missing" if member not in have else f"= {have[member]}"
                    diffs.append(f"enum {name}: {member} is {value} in the binding's llama.h, {got} in the build's")
                    break
        elif ours[k] != theirs[k]:
            diffs.append(f"{kind} {name}: {divergence(ours[k], theirs[k])}")
    return Compatibility(binding, not diffs, len(keys), diffs[0] if diffs else "", len(diffs))


def divergence(build: str, binding: str, context: int = 70) -> str:
    """Where two normalized declarations part: the text of each from a little before that point."""
    i = next((n for n, (a, b) in enumerate(zip(build, binding, strict=False)) if a != b), min(len(build), len(binding)))
    start = max(0, i - 20)
    return f"the build declares ...{build[start : i + context]!r}..., the binding expects ...{binding[start : i + context]!r}..."


def enum_members(decl: str) -> dict[str, int | str]:
    """An enum's members and values (implicit ones counted on): members appended later keep the binding's valid."""
    body = decl[decl.index("{") + 1 : decl.rindex("}")]
    out: dict[str, int | str] = {}
    prev: int | str = -1
    for item in filter(None, (x.strip() for x in body.split(","))):
        name, _, expr = item.partition("=")
        if expr:
            try:
                value: int | str = int(expr, 0)
            except ValueError:
                value = out.get(expr, expr)  # another member's name, or an expression kept as written
        else:
            value = prev + 1 if isinstance(prev, int) else f"{prev}+1"
        out[name.strip()] = prev = value
    return out


def binding_source(python: str = sys.executable) -> tuple[str, str]:
    """(llama-cpp-python version, its llama_cpp.py source) as ``python`` imports it, without loading the library."""
    code = (
        "import importlib.util, importlib.metadata as md\n"
        "spec = importlib.util.find_spec('llama_cpp')\n"
        "print(md.version('llama-cpp-python'))\n"
        "print(spec.submodule_search_locations[0])"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise UserError("binding", f"{python} has no llama-cpp-python: {out.stderr.strip()[-300:]}")
    ver, folder = out.stdout.split()[-2:]
    return ver, (Path(folder) / "llama_cpp.py").read_text()


def own_binding_version() -> str | None:
    try:
        return installed_version("llama-cpp-python")
    except PackageNotFoundError:
        return None


@lru_cache(maxsize=8)
def binding_header(binding: str) -> str:
    """The ``llama.h`` llama-cpp-python ``binding`` vendors: from the tools cache's sdist, else downloaded once."""
    cache = tools_cache_dir()
    kept = cache / f"llama.cpp-{binding}" / "src" / "include" / "llama.h"  # scripts/build_llama_tools.sh keeps it
    if kept.exists():
        return kept.read_text()
    header = cache / "headers" / f"llama-cpp-python-{binding}-llama.h"
    if header.exists():
        return header.read_text()
    sdist = cache / f"llama_cpp_python-{binding}.tar.gz"
    if not sdist.exists():
        with tempfile.TemporaryDirectory() as tmp:
            got = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", tmp]
                + [f"llama-cpp-python=={binding}"],
                capture_output=True,
                text=True,
                timeout=600,
            )
            found = list(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
            if got.returncode != 0 or not found:
                raise UserError(
                    "binding",
                    f"the header llama-cpp-python {binding} was written against is not here and its sdist could "
                    f"not be downloaded ({got.stderr.strip()[-300:]}).",
                )
            cache.mkdir(parents=True, exist_ok=True)
            sdist = found[0].replace(sdist)
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("vendor/llama.cpp/include/llama.h"))
        text = tar.extractfile(member).read().decode()
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(text)
    return text


def check(build_header: Path, python: str = sys.executable) -> Compatibility:
    """Whether the llama-cpp-python that ``python`` imports can drive the library built with ``build_header``."""
    binding, source = binding_source(python)
    if not build_header.exists():  # a release archive ships libraries and tools, not llama.h
        return Compatibility(binding, False, 0, "the build has no llama.h to check the binding against", 0)
    return compare(build_header.read_text(), binding_header(binding), source, binding)

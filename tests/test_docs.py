"""Every document the code and the README cite is in the repository: a path under
docs/ names a file that exists, and nothing points at documents kept outside it."""

from __future__ import annotations

import re

from tests.support.paths import ROOT

SOURCES = ("aioge", "cffi_build", "tests", "tools", "benchmarks", "examples", ".ci")
CITED = re.compile(r"\bdocs/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(?:md|png|txt)\b")
OUTSIDE = re.compile(r"\bDESIGN(?:\.md| §)|\bresearch/[a-z_-]+\.md")


def _texts():
    files = [ROOT / "README.md", ROOT / "pyproject.toml", *(ROOT / "docs").glob("*.md")]
    for top in SOURCES:
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in (".py", ".c", ".h", ".md", "") and p.is_file()]
    for p in files:
        if "__pycache__" in p.parts:
            continue
        try:
            yield p, p.read_text()
        except UnicodeDecodeError:
            continue  # a built binary


def test_cited_documents_exist():
    missing, outside = [], []
    for path, text in _texts():
        rel = path.relative_to(ROOT)
        for m in CITED.finditer(text):
            if str(rel) == "docs/acl-spec.md" and m.group().startswith("docs/zh/"):
                continue  # the upstream CANN repositories' own docs, named with their commits in its §0
            if not (ROOT / m.group()).is_file():
                missing.append(f"{rel}: {m.group()}")
        outside += [f"{rel}: {m.group()}" for m in OUTSIDE.finditer(text)]
    assert not missing, f"cited documents that are not in the repository: {missing}"
    assert not outside, f"citations of documents kept outside the repository: {outside}"


HISTORY = re.compile(r"\bissues? ?#?\d+|\bthis (?:lane|session)\b|\blane's\b|\bsession-\d+", re.IGNORECASE)


def test_readme_is_a_manual_not_a_changelog():
    """The README and docs/ are for users: no issue numbers, no development sessions or lanes."""
    found = []
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        if path.name == "acl-spec.md":
            continue  # the CANN reference, quoting upstream text
        for i, line in enumerate(path.read_text().splitlines(), start=1):
            found += [f"{path.relative_to(ROOT)}:{i}: {m.group()!r}" for m in HISTORY.finditer(line)]
    assert not found, f"development history in the user documents: {found}"


ISSUE = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)


def test_code_comments_name_no_issue_numbers() -> None:
    """Docstrings and comments say what the code does and why, not which tracker entry asked for it."""
    found = []
    for path, text in _texts():
        if path.name == "acl-spec.md":
            continue  # the CANN reference, quoting upstream text
        for i, line in enumerate(text.splitlines(), start=1):
            found += [f"{path.relative_to(ROOT)}:{i}: {m.group()!r}" for m in ISSUE.finditer(line)]
    assert not found, f"issue numbers in the code's comments and docstrings: {found}"

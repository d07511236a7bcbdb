"""The repository is self-contained: no file points at a document the repository does not have (the
design and requirements are in docs/design.md) or at an issue number of a tracker a reader cannot see."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "node_modules"}

# Built from pieces, so that this file does not match itself.
FORBIDDEN = [
    ("an outside design brief", re.compile("DESIGN" + r"\.md")),
    ("an outside specification folder", re.compile("shared" + "/seeds")),
    ("an outside specification", re.compile("cdap-tms-design" + r"\.txt")),
    ("an issue number", re.compile("issues?" + r"[ -]#?\d+", re.IGNORECASE)),
    ("a merge conflict's marker", re.compile("^(" + "<" * 7 + "|" + ">" * 7 + ") ")),
]


def _files() -> list[Path]:
    """Every file of the repository: git's tracked and untracked-but-not-ignored files when git is
    there, else a walk of the tree without virtualenvs, caches and build output."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
        names = [name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        names = [
            str(path.relative_to(ROOT))
            for path in ROOT.rglob("*")
            if path.is_file()
            and not SKIP_DIRS.intersection(path.relative_to(ROOT).parts)
            and not any(part.endswith(".egg-info") for part in path.parts)
        ]
    return [ROOT / name for name in names if not SKIP_DIRS.intersection(Path(name).parts)]


def _text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:  # a file deleted in the work tree but still in the index
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def test_no_file_refers_outside_the_repository() -> None:
    found = []
    for path in _files():
        text = _text(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for what, pattern in FORBIDDEN:
                match = pattern.search(line)
                if match:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {what} ({match.group(0)!r})")
    assert not found, "use docs/design.md or plain words instead (and resolve merge conflicts):\n" + "\n".join(found)


def test_the_design_page_has_the_requirements_and_the_glossary() -> None:
    """Code and docs cite "docs/design.md, requirement N": every N cited exists on the page."""
    design = (ROOT / "docs" / "design.md").read_text()
    assert "## Glossary" in design
    defined = {int(n) for n in re.findall(r"^(\d+)\. \*\*", design, re.MULTILINE)}
    assert defined == set(range(1, max(defined) + 1)), "requirements are numbered 1..N without gaps"
    cited = set()
    for path in _files():
        text = _text(path)
        if text is None:
            continue
        for match in re.finditer(r"design\.md\)?,? requirements? ([\d, –and-]+)", text):
            cited.update(int(n) for n in re.findall(r"\d+", match.group(1)))
    assert cited, "nothing cites a requirement: the pattern above is stale"
    assert cited <= defined, f"cited requirements missing from docs/design.md: {sorted(cited - defined)}"


def _anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a markdown page (lower case, punctuation dropped,
    spaces to hyphens, a repeated heading suffixed -1, -2, ...)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip()
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_every_link_between_the_markdown_pages_resolves() -> None:
    """A link to a page of the repository, and to a heading in it, leads somewhere (pages get split and
    headings renamed: benchmarks.md lost its run logs to git)."""
    pages = [path for path in _files() if path.suffix == ".md" and path.exists()]
    broken = []
    for page in pages:
        text = page.read_text()
        for target, anchor in re.findall(r"\]\(([^)\s#]*\.md|)(?:#([^)\s]+))?\)", text):
            if target.startswith(("http://", "https://")):
                continue
            linked = (page.parent / target).resolve() if target else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} does not exist")
            elif anchor and anchor not in _anchors(linked.read_text()):
                broken.append(f"{page.relative_to(ROOT)}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_every_python_example_of_the_readme_and_the_docs_is_run() -> None:
    """tests/integration/test_docs_examples.py runs the blocks marked ``<!-- tested: python -->``: no page has
    a Python example that is not marked (one not meant to run is fenced as ``text``)."""
    unmarked = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        blocks = text.count("```python\n")
        marked = len(re.findall(r"<!-- tested: python -->\s*```python\n", text))
        if marked != blocks:
            unmarked.append(f"{page.relative_to(ROOT)}: {blocks - marked}")
    assert not unmarked, "Python examples not marked tested:\n" + "\n".join(unmarked)


DOCS_BUDGET_BYTES = 250_000


def test_the_documentation_pages_stay_within_their_budget() -> None:
    """docs/*.md are for people, not a run log: together they stay within 250 KB (measured figures belong in
    the generated docs/benchmarks.md, history in git)."""
    sizes = {path.name: path.stat().st_size for path in (ROOT / "docs").glob("*.md")}
    total = sum(sizes.values())
    biggest = ", ".join(f"{name} {size // 1000} KB" for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:5])
    assert total <= DOCS_BUDGET_BYTES, (
        f"docs/*.md hold {total // 1000} KB, over {DOCS_BUDGET_BYTES // 1000} KB: {biggest}"
    )

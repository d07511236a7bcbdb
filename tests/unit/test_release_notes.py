"""tools/release_notes.py: the news fragments of changes/ become a release's section of CHANGELOG.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import release_notes

ROOT = Path(__file__).resolve().parents[2]


def _tree(tmp_path: Path, fragments: dict[str, str]) -> Path:
    (tmp_path / "changes").mkdir()
    (tmp_path / "changes" / "README.md").write_text("how\n")
    for name, text in fragments.items():
        (tmp_path / "changes" / name).write_text(text)
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n\nIntro.\n\n## 0.1.0 (2026-12-01)\n\n- first\n")
    return tmp_path


def test_a_release_puts_the_fragments_on_top_in_order_and_deletes_them(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"44.b.md": "Second,\nover two lines.\n", "41.a.md": "- First.\n"})
    assert release_notes.main(["0.2.0", "--date", "2027-01-02", "--root", str(root)]) == 0
    assert (root / "CHANGELOG.md").read_text() == (
        "# Changelog\n\nIntro.\n\n## 0.2.0 (2027-01-02)\n\n- First.\n- Second,\n  over two lines.\n\n"
        "## 0.1.0 (2026-12-01)\n\n- first\n"
    )
    assert [p.name for p in (root / "changes").iterdir()] == ["README.md"]


def test_a_draft_changes_nothing_and_a_misnamed_fragment_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _tree(tmp_path, {"41.a.md": "One.\n"})
    assert release_notes.main(["0.2.0", "--date", "2027-01-02", "--draft", "--root", str(root)]) == 0
    assert capsys.readouterr().out == "## 0.2.0 (2027-01-02)\n\n- One.\n"
    assert (root / "changes" / "41.a.md").exists()
    (root / "changes" / "notes.txt").write_text("x")
    assert release_notes.main(["0.2.0", "--root", str(root)]) == 2
    assert "not named <issue>.<slug>.md: notes.txt" in capsys.readouterr().err
    assert "0.2.0" not in (root / "CHANGELOG.md").read_text()


def test_the_repositorys_fragments_are_well_formed() -> None:
    for path in release_notes.fragments(ROOT / "changes"):
        lines = path.read_text().strip().splitlines()
        assert 1 <= len(lines) <= 4, f"{path.name}: one to four lines"

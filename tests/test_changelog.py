"""The CHANGELOG is for users, in the Keep-a-Changelog shape: one section per release, the
standard subsections, a newest entry short enough to read, and links to docs/ that resolve
(measured figures live there, with their commands)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHANGELOG = ROOT / "CHANGELOG.md"
RELEASE = re.compile(r"## \[(Unreleased|\d+\.\d+\.\d+)\](?: - (\d{4}-\d{2}-\d{2}|Unreleased))?")
SUBSECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def _releases() -> list[tuple[str, list[str]]]:
    """Each ``## `` section as (its heading, its lines up to the next release heading)."""
    releases: list[tuple[str, list[str]]] = []
    for line in CHANGELOG.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            releases.append((line, []))
        elif releases:
            releases[-1][1].append(line)
    return releases


def test_newest_entry_is_short() -> None:
    heading, lines = _releases()[0]
    assert heading.startswith("## [")
    assert len([heading, *lines]) <= 80


def test_releases_and_subsections_are_keep_a_changelog_ones() -> None:
    releases = _releases()
    assert len(releases) >= 2
    versions = []
    for heading, lines in releases:
        match = RELEASE.fullmatch(heading)
        assert match, heading
        if match.group(1) != "Unreleased":
            versions.append(tuple(int(part) for part in match.group(1).split(".")))
        subsections = [line[4:] for line in lines if line.startswith("### ")]
        assert set(subsections) <= SUBSECTIONS, (heading, subsections)
        assert len(subsections) == len(set(subsections)), heading
        assert not any(line.startswith("####") for line in lines), heading
    assert versions == sorted(versions, reverse=True)


def test_docs_links_resolve() -> None:
    targets = re.findall(r"\]\(([^)\s]+)\)", CHANGELOG.read_text(encoding="utf-8"))
    relative = [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert any(t.startswith("docs/") for t in relative)
    assert [t for t in relative if not (ROOT / t).exists()] == []

"""The repository describes the service, its design and its analyses in its own words: no file
cites a document that is not in it (the service's notes or reference, a design note, an issue)."""

from __future__ import annotations

import re
import subprocess

from tests.helpers import REPO

OUTSIDE = re.compile(
    r"service-notes|service-reference|(?<![\w/])design\.md|design §|(?<![\w/])analyses\.md|§\s?\d|/work/shared|the issue's"
)


def test_no_file_cites_a_document_outside_the_repository():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    citing = []
    for name in filter(None, listed.split("\0")):
        path = REPO / name
        if not path.is_file() or name == "tests/docs/test_citations.py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a binary file: a picture, a recorded body
            continue
        citing += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not citing, f"cites a document outside the repository: {citing}"

#!/usr/bin/env python3
"""Checks the documentation: README.md and every docs/**/*.md.

1. Quoted code. A fenced block after a marker must match the files it
   quotes:
     <!-- embed-check: same FILE -->         the next fenced block is FILE, whole
     <!-- embed-check: in FILE [FILE...] --> the next fenced block's lines are
                                             consecutive lines of each FILE
                                             (indentation aside)
   FILE is relative to the repository root. At least MIN_EMBED_CHECKS
   blocks must be found over all pages, so that moving the pages cannot
   quietly drop the check.
2. Links. Every relative link, `[text](target)` or `![alt](target)`
   (http, https and mailto links are not checked), must name an existing
   file or directory, relative to the page; a `#anchor` must match a heading
   of the target page (or of the same page for a bare `#anchor`), by
   GitHub's slug rules.

Prints every problem as FILE:LINE: what is wrong; exit status 1 if any.
Usage: python3 scripts/check-docs.py [REPO_ROOT]
"""

import pathlib
import re
import sys

# At least this many embed-check blocks over all pages.
MIN_EMBED_CHECKS = 6

# Link targets (relative to the repository root) that may be missing: none.
ALLOWED_MISSING = set()

MARKER = re.compile(
    r"<!-- embed-check: (same|in) ([^>]+?) -->\n+```[a-z]*\n(.*?)^```", re.S | re.M
)
# [text](target) and ![alt](target); the text may span lines, the target
# may carry a "title".
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def contains(text, block):
    lines = [l.strip() for l in text.splitlines()]
    want = [l.strip() for l in block.splitlines()]
    return any(lines[i : i + len(want)] == want for i in range(len(lines) - len(want) + 1))


def first_difference(kind, quoted, block):
    """Where a quoted block departs from its file, for the error message."""
    b = block.splitlines()
    if kind == "same":
        q = quoted.splitlines()
        for i, (x, y) in enumerate(zip(q, b)):
            if x != y:
                return f" (first difference at line {i + 1} of the block: {y.strip()!r}, the file has {x.strip()!r})"
        return f" (the block has {len(b)} lines, the file {len(q)})"
    q = {l.strip() for l in quoted.splitlines()}
    for i, y in enumerate(b):
        if y.strip() not in q:
            return f" (line {i + 1} of the block is nowhere in the file: {y.strip()!r})"
    return " (its lines are in the file, but not consecutively)"


def blank_out(text, pattern):
    """text with every match of pattern replaced by spaces (newlines kept),
    so positions and line numbers stay the same."""
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def slug(heading):
    """GitHub's anchor for a heading: lowercase, markup and punctuation
    other than - and _ removed, spaces to -."""
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    s = s.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)  # \w keeps letters, digits, _ (Unicode too)
    return s.replace(" ", "-")


def anchors(text):
    found = set()
    seen = {}
    for m in HEADING.finditer(blank_out(text, FENCE)):
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        found.add(s if n == 0 else f"{s}-{n}")
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent).resolve()
    pages = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
    errors = []
    checks = 0
    links = 0
    anchor_cache = {}

    def page_anchors(path):
        if path not in anchor_cache:
            anchor_cache[path] = anchors(path.read_text())
        return anchor_cache[path]

    for page in pages:
        rel = page.relative_to(root)
        text = page.read_text()

        # 1. Quoted code.
        for m in MARKER.finditer(text):
            kind, files, block = m.groups()
            for f in files.split():
                checks += 1
                where = f"{rel}:{line_of(text, m.start())}"
                try:
                    quoted = (root / f).read_text()
                except OSError as e:
                    errors.append(f"{where}: block marked `{kind} {f}`: cannot read {f}: {e.strerror}")
                    continue
                if not (quoted == block if kind == "same" else contains(quoted, block)):
                    how = "is not the whole of" if kind == "same" else "is not consecutive lines of"
                    errors.append(f"{where}: the code block marked `{kind} {f}` {how} {f}{first_difference(kind, quoted, block)}")

        # 2. Links, outside code.
        prose = blank_out(blank_out(text, FENCE), INLINE_CODE)
        for m in LINK.finditer(prose):
            target = m.group(1)
            where = f"{rel}:{line_of(text, m.start(1))}"
            if re.match(r"(?i)(https?|mailto):", target):
                continue
            links += 1
            path_part, _, anchor = target.partition("#")
            if path_part:
                dest = (page.parent / path_part).resolve()
                try:
                    dest_rel = dest.relative_to(root).as_posix()
                except ValueError:
                    errors.append(f"{where}: link `{target}` points outside the repository")
                    continue
                if not dest.exists():
                    if dest_rel not in ALLOWED_MISSING:
                        errors.append(f"{where}: link `{target}`: no such file {dest_rel}")
                    continue
            else:
                dest = page
            if anchor:
                if dest.is_dir() or dest.suffix != ".md":
                    errors.append(f"{where}: link `{target}`: anchor #{anchor} on something that is not a markdown page")
                elif anchor not in page_anchors(dest):
                    errors.append(
                        f"{where}: link `{target}`: no heading with anchor #{anchor} in {dest.relative_to(root).as_posix()}"
                    )

    if checks < MIN_EMBED_CHECKS:
        errors.append(
            f"only {checks} embed-check blocks found in README.md and docs/; expected at least {MIN_EMBED_CHECKS}"
        )
    for e in errors:
        print(f"check-docs: {e}", file=sys.stderr)
    if errors:
        print(f"check-docs: FAILED: {len(errors)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-docs: {len(pages)} pages: {checks} quoted blocks match, {links} relative links resolve", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The documentation's checks that mdBook does not make (scripts/check-docs.sh
runs this after building the book):

1. Links. Every relative link and image in the book (docs/src/**/*.md),
   README.md, ARCHITECTURE.md and BENCHMARKS.md names a file or directory
   that exists; a link from a book chapter stays inside docs/src/ (the built
   book has nothing else); and every `#anchor` into a Markdown file (or
   within the same file) is the id mdBook gives one of its headings.
2. ARCHITECTURE.md's paths. Every repository path it names in backticks or
   in a link exists: `crates/...`, `scripts/...`, `docs/...`, `fuzz/...`,
   `bench/...`, `examples/...`, `.ci/...`, and a bare `foo.rs` or `dir/`
   under a crate the heading or the paragraph names (`crates/<crate>/src/`
   or `crates/<crate>/`), else at the repository's root.
3. Sizes. README.md and ARCHITECTURE.md are at most 25 KiB each.

With --book DIR (the built book), it also checks that the heading ids it
computes are the ones mdBook wrote, so the anchor check cannot drift from
mdBook's rules. Prints every problem and exits 1 if there is one.
"""

import argparse
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK_SRC = os.path.join(ROOT, "docs", "src")
TOP_FILES = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"]
SIZE_LIMITS = {"README.md": 25 * 1024, "ARCHITECTURE.md": 25 * 1024}
TOP_DIRS = ("crates/", "scripts/", "docs/", "fuzz/", "bench/", "examples/", "clients/", "api/", ".ci/", ".cargo/")
EXTENSIONS = {"rs", "sh", "md", "toml", "sql", "js", "mjs", "css", "html", "yaml", "yml", "json", "py", "png", "ts"}

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
CRATE = re.compile(r"crates/(agentwire[\w-]*)")

problems = []


def problem(path, message):
    problems.append(f"{os.path.relpath(path, ROOT)}: {message}")


def prose_lines(text):
    """The lines outside fenced code blocks, with their line numbers."""
    fenced = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match:
            if fenced is None:
                fenced = match.group(1)
            elif match.group(1) == fenced:
                fenced = None
            continue
        if fenced is None:
            yield number, line


def prose(text):
    """The text outside fenced code blocks, line numbers kept."""
    lines = text.splitlines()
    kept = {n for n, _ in prose_lines(text)}
    return "\n".join(line if i in kept else "" for i, line in enumerate(lines, 1))


def without_code_spans(text):
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)


def normalize_id(content):
    """mdBook's `normalize_id`: alphanumerics (lowercased when ASCII), `_`
    and `-` kept, whitespace turned into `-`, everything else dropped."""
    out = []
    for ch in content:
        if ch.isalnum() or ch in "_-":
            out.append(ch.lower() if ch.isascii() else ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def heading_text(markdown):
    """A heading's text as rendered: code spans, links and emphasis reduced
    to their text."""
    text = CODE_SPAN.sub(lambda m: m.group(2), markdown)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(\*\*|__|\*)(.+?)\1", r"\2", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.strip()


def heading_ids(path, cache={}):
    """The ids mdBook gives the headings of `path`, in order (a repeated id
    gets `-1`, `-2`, ...)."""
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        ids, seen = [], {}
        for _, line in prose_lines(text):
            match = HEADING.match(line)
            if not match:
                continue
            base = normalize_id(heading_text(match.group(2)))
            count = seen.get(base, 0)
            seen[base] = count + 1
            ids.append(base if count == 0 else f"{base}-{count}")
        cache[path] = ids
    return cache[path]


def link_targets(text):
    body = without_code_spans(prose(text))
    for match in LINK.finditer(body):
        yield body.count("\n", 0, match.start()) + 1, match.group(1)
    for match in REF_DEF.finditer(body):
        yield body.count("\n", 0, match.start()) + 1, match.group(1)


def check_links(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    in_book = os.path.commonpath([path, BOOK_SRC]) == BOOK_SRC
    for line, target in link_targets(text):
        if SCHEME.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        where = f"line {line}: link {target!r}"
        if not os.path.exists(resolved):
            problem(path, f"{where}: {os.path.relpath(resolved, ROOT)} does not exist")
            continue
        if in_book and os.path.commonpath([os.path.realpath(resolved), BOOK_SRC]) != BOOK_SRC:
            problem(path, f"{where}: leaves docs/src/ (the built book has only docs/src/)")
            continue
        if anchor and resolved.endswith(".md"):
            if anchor not in heading_ids(resolved):
                problem(path, f"{where}: {os.path.relpath(resolved, ROOT)} has no heading with the id {anchor!r}")


def looks_like_path(token):
    if token.startswith(TOP_DIRS):
        return True
    if not re.fullmatch(r"[\w-][\w.-]*(/[\w.-]+)*/?", token):
        return False
    if token.endswith("/"):
        return "/" in token[:-1] or token[:-1].isidentifier()
    name = token.rsplit("/", 1)[-1]
    stem, dot, extension = name.rpartition(".")
    return bool(dot and stem and extension in EXTENSIONS)


def path_exists(token, crates):
    if "*" in token:
        return bool(glob.glob(os.path.join(ROOT, token)))
    if token.startswith(TOP_DIRS):
        return os.path.exists(os.path.join(ROOT, token))
    if crates:
        return any(
            os.path.exists(os.path.join(ROOT, "crates", crate, base, token))
            for crate in crates
            for base in ("src", "")
        )
    return os.path.exists(os.path.join(ROOT, token))


def check_architecture_paths(path):
    with open(path, encoding="utf-8") as f:
        text = prose(f.read())
    heading_crates = []
    # A block is a paragraph or a list item; its crates and its heading's
    # are the context of a bare file name in it.
    blocks = re.split(r"\n\s*\n|\n(?=\s*[-*] )", text)
    offset = 0
    for block in blocks:
        start = text.index(block, offset)
        offset = start + len(block)
        first = block.lstrip("\n").split("\n", 1)[0]
        if HEADING.match(first):
            heading_crates = CRATE.findall(first)
        crates = set(heading_crates) | set(CRATE.findall(block))
        tokens = [m.group(2).strip() for m in CODE_SPAN.finditer(block)]
        tokens += [m.group(1) for m in LINK.finditer(block) if not SCHEME.match(m.group(1))]
        for token in tokens:
            token = token.split("#", 1)[0]
            if not token or not looks_like_path(token):
                continue
            if not path_exists(token, sorted(crates)):
                line = text.count("\n", 0, start + block.find(token)) + 1
                context = f" (under {', '.join(sorted(crates))})" if crates and not token.startswith(TOP_DIRS) else ""
                problem(path, f"line {line}: names {token!r}{context}, which does not exist")


def check_sizes():
    for name, limit in SIZE_LIMITS.items():
        size = os.path.getsize(os.path.join(ROOT, name))
        if size > limit:
            problem(os.path.join(ROOT, name), f"{size} bytes, over the limit of {limit} ({limit // 1024} KiB)")


def check_against_book(book):
    """The ids computed here are the ones mdBook wrote into the HTML."""
    for directory, _, files in os.walk(BOOK_SRC):
        for name in files:
            if not name.endswith(".md") or name == "SUMMARY.md":
                continue
            source = os.path.join(directory, name)
            html = os.path.join(book, os.path.relpath(source, BOOK_SRC)[:-3] + ".html")
            if not os.path.exists(html):
                problem(source, f"not in the built book ({os.path.relpath(html, ROOT)} missing): add it to SUMMARY.md")
                continue
            with open(html, encoding="utf-8") as f:
                written = set(re.findall(r'<h[1-6] id="([^"]+)"', f.read()))
            for anchor in heading_ids(source):
                if anchor not in written:
                    problem(source, f"heading id {anchor!r} computed here is not in {os.path.relpath(html, ROOT)} (mdBook's rules changed? fix normalize_id in scripts/check_docs.py)")


def markdown_files():
    for directory, _, files in os.walk(BOOK_SRC):
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(directory, name)
    for name in TOP_FILES:
        if os.path.exists(os.path.join(ROOT, name)):
            yield os.path.join(ROOT, name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--book", help="the built book, to check the heading ids against")
    args = parser.parse_args()
    files = list(markdown_files())
    for path in files:
        check_links(path)
    check_architecture_paths(os.path.join(ROOT, "ARCHITECTURE.md"))
    check_sizes()
    if args.book:
        check_against_book(os.path.abspath(args.book))
    for line in problems:
        print(f"check-docs: {line}", file=sys.stderr)
    if problems:
        print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-docs: {len(files)} Markdown files, every link and path resolves; README.md and ARCHITECTURE.md within 25 KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""MkDocs hooks (mkdocs.yml): the repository's two READMEs are pages of the site, README.md its home page and
kubeflow/README.md its Kubeflow chapter, so they are written once, where a clone shows them. Their links are
relative to where they are in the repository; on the site every page sits in one folder.

Also the package layout of docs/architecture.md, made from the packages' and modules' docstrings (`layout`):
`python docs_hooks.py` writes it into the page, and tests/test_docs.py holds the page to it."""

import ast
import os
import re
import sys

from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.abspath(__file__))
# Site page -> the repository file it is, and how that file's links read from the site's folder.
PAGES = {"index.md": "README.md", "kubeflow.md": os.path.join("kubeflow", "README.md")}
LINKS = (
    (r"\]\(docs/", "]("),  # README.md -> a chapter
    (r"\]\((?:\.\./)?kubeflow/README\.md", "](kubeflow.md"),  # README.md or a chapter -> the Kubeflow chapter
    (r"\]\(\.\./README\.md", "](index.md"),  # a chapter -> README.md
)


def on_files(files, config):
    for page, source in PAGES.items():
        files.append(File.generated(config, page, abs_src_path=os.path.join(ROOT, source)))
    return files


def on_page_markdown(markdown, page, config, files):
    for pattern, replacement in LINKS:
        markdown = re.sub(pattern, replacement, markdown)
    return markdown


# The layout block of docs/architecture.md: the folders of the package, each package's and module's docstring.
LAYOUT_PAGE = os.path.join(ROOT, "docs", "architecture.md")
LAYOUT_FOLDERS = ("pipeline", "components")
LAYOUT_BLOCK = re.compile(r"<!-- layout -->\n.*?<!-- /layout -->", re.S)


def _summary(path: str) -> str:
    """A module's docstring, its first paragraph on one line ("" when it has none)."""
    with open(path, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read(), path)) or ""
    return " ".join(doc.split("\n\n")[0].split())


def layout(root: str = ROOT) -> str:
    """The package tree as a Markdown list: each folder and module of LAYOUT_FOLDERS with its docstring's first
    paragraph, folders before modules, in name order."""
    lines = []

    def walk(folder: str, depth: int) -> None:
        entries = sorted(os.listdir(os.path.join(root, folder)))
        packages = [e for e in entries if os.path.isfile(os.path.join(root, folder, e, "__init__.py"))]
        modules = [e for e in entries if e.endswith(".py") and e != "__init__.py"]
        for name in packages:
            path = os.path.join(folder, name)
            lines.append(f"{'  ' * depth}- `{name}/`: {_summary(os.path.join(root, path, '__init__.py'))}")
            walk(path, depth + 1)
        for name in modules:
            lines.append(f"{'  ' * depth}- `{name}`: {_summary(os.path.join(root, folder, name))}")

    for folder in LAYOUT_FOLDERS:
        lines.append(f"- `{folder}/` (`tfxflow.{folder}`): {_summary(os.path.join(root, folder, '__init__.py'))}")
        walk(folder, 1)
    return "\n".join(lines)


def layout_block(root: str = ROOT) -> str:
    return f"<!-- layout -->\n{layout(root)}\n<!-- /layout -->"


def write_layout(page: str = LAYOUT_PAGE) -> None:
    """Writes the layout block into `page` (which has one)."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    updated, count = LAYOUT_BLOCK.subn(lambda _: layout_block(), text)
    if count != 1:
        raise ValueError(f"{page}: {count} <!-- layout --> blocks, need one")
    with open(page, "w", encoding="utf-8") as f:
        f.write(updated)


if __name__ == "__main__":
    write_layout(*sys.argv[1:])

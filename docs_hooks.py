"""MkDocs hooks (mkdocs.yml): the repository's two READMEs are pages of the site, README.md its home page and
kubeflow/README.md its Kubeflow chapter, so they are written once, where a clone shows them. Their links are
relative to where they are in the repository; on the site every page sits in one folder."""

import os
import re

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

"""Writes debian_translations.csv: Debian package descriptions in other languages (Translation-<lang> of Debian's
main archive), real text with accents, ligatures, Greek, Cyrillic, CJK, Hangul and full-width forms for the
tokenizer's comparison with the reference BERT tokenizers.

    python -m tests.data.debian_translations [OUT.csv]   (the CSV is kept in the tests)

Per language the first ROWS_PER_LANGUAGE packages by a hash of the name, so the sample is the same wherever it is
made from the same release's files. A description is its synopsis and long description, blank lines (" .") kept
as empty lines."""

import bz2
import csv
import hashlib
import sys
import urllib.request

from tests.data.debian_packages import _description, stanzas

RELEASE = "bookworm"
TRANSLATIONS = "http://deb.debian.org/debian/dists/{release}/main/i18n/Translation-{language}.bz2"
LANGUAGES = ("de", "fr", "es", "it", "pt_BR", "pl", "cs", "ru", "uk", "el", "ja", "zh_CN", "ko", "vi")
ROWS_PER_LANGUAGE = 80


def sample(language: str, text: str):
    """(language, package, description) of the first ROWS_PER_LANGUAGE packages by a hash of the name."""
    found = {}
    for fields in stanzas(text):
        description = fields.get(f"Description-{language}")
        if "Package" in fields and description:
            found[fields["Package"]] = _description(description)
    chosen = sorted(found, key=lambda name: hashlib.sha256(name.encode()).hexdigest())[:ROWS_PER_LANGUAGE]
    return [(language, name, found[name]) for name in chosen]


def main(argv):
    out = argv[1] if len(argv) > 1 else "tests/data/debian_translations.csv"
    rows = []
    for language in LANGUAGES:
        url = TRANSLATIONS.format(release=RELEASE, language=language)
        with urllib.request.urlopen(url, timeout=300) as response:
            rows += sample(language, bz2.decompress(response.read()).decode("utf-8"))
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["language", "package", "description"])
        writer.writerows(rows)


if __name__ == "__main__":
    main(sys.argv)

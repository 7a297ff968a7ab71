"""Writes debian_packages.csv: Debian package descriptions (a synopsis line and the long description, whose
line breaks stay in the quoted value) and their archive section, a natural multi-class text task.

    python -m tests.data.debian_packages [OUT.csv]   (the CSV is kept in the tests)

Sections come from `apt-cache dumpavail` (the machine's package lists), the long descriptions from Debian's
Translation-en of the same release (downloaded from the mirror, by Description-md5).

Packages of the same source share most of their description (foo, foo-data, foo-doc): one package per source
is kept, and per section the first ROWS_PER_SECTION by a hash of the name, so the sample is the same on every
machine with the same package lists."""

import collections
import csv
import hashlib
import lzma
import subprocess
import sys
import urllib.request

TRANSLATIONS = "http://deb.debian.org/debian/dists/{release}/main/i18n/Translation-en.xz"

SECTIONS = ("games", "science", "fonts", "sound", "graphics", "net")
ROWS_PER_SECTION = 500


def stanzas(text: str):
    """The fields of each stanza of a Debian control file (continuation lines kept in their field)."""
    for stanza in text.split("\n\n"):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        yield fields


def packages(text: str, descriptions):
    """(name, source, section, description) of each package of `apt-cache dumpavail` whose long description
    `descriptions` ({Description-md5: Description-en}) holds."""
    for fields in stanzas(text):
        long = descriptions.get(fields.get("Description-md5"))
        if "Package" in fields and long:
            source = fields.get("Source", fields["Package"]).split(" ")[0]
            yield fields["Package"], source, fields.get("Section", ""), _description(long)


def _description(raw: str) -> str:
    """The synopsis, then the long description's lines without their leading space (" ." is a blank line)."""
    first, *rest = raw.split("\n")
    lines = [first.strip()] + [("" if line.strip() == "." else line[1:].rstrip()) for line in rest]
    return "\n".join(lines).strip()


def sample(text: str, descriptions):
    chosen = collections.defaultdict(dict)  # section -> source -> (hash, name, description)
    for name, source, section, description in packages(text, descriptions):
        section = section.split("/")[-1]
        if section not in SECTIONS:
            continue
        key = hashlib.sha256(name.encode()).hexdigest()
        if source not in chosen[section] or key < chosen[section][source][0]:
            chosen[section][source] = (key, name, description)
    rows = []
    for section in SECTIONS:
        for key, name, description in sorted(chosen[section].values())[:ROWS_PER_SECTION]:
            rows.append((key, name, description, section))
    return [row[1:] for row in sorted(rows)]


def main(argv):
    out = argv[1] if len(argv) > 1 else "tests/data/debian_packages.csv"
    text = subprocess.run(["apt-cache", "dumpavail"], check=True, capture_output=True, text=True).stdout
    release = dict(line.split("=", 1) for line in open("/etc/os-release").read().split() if "=" in line)
    with urllib.request.urlopen(TRANSLATIONS.format(release=release["VERSION_CODENAME"]), timeout=300) as response:
        translations = lzma.decompress(response.read()).decode("utf-8")
    descriptions = {f["Description-md5"]: f["Description-en"] for f in stanzas(translations) if "Description-en" in f}
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["package", "description", "section"])
        writer.writerows(sample(text, descriptions))


if __name__ == "__main__":
    main(sys.argv)

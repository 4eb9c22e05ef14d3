"""Name the course's GitHub repository once, everywhere it is written: the Colab cell and the Colab link of
every notebook, the README's Binder and Colab links, and helpers.paths.COURSE_REPO.

    python scripts/set_course_repo.py my-org/verifiers-course

Until it is set, the path is the placeholder OWNER/REPO and the Colab cell says so instead of cloning.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.paths import COURSE_REPO

REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")


def files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "helpers" / "paths.py", *sorted((ROOT / "notebooks").glob("*.ipynb"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", help="owner/name on GitHub")
    new = parser.parse_args().repo
    if not REPO.fullmatch(new):
        raise SystemExit(f"{new!r} is not a GitHub path of the form owner/name")
    # Every place holds it as github.com/<repo>, github/<repo>, gh/<repo> or a quoted "<repo>" string.
    patterns = [(f"{prefix}{COURSE_REPO}", f"{prefix}{new}")
                for prefix in ("github.com/", "github/", "gh/", '"', '\\"')]
    for path in files():
        text = original = path.read_text()
        for old, replacement in patterns:
            text = text.replace(old, replacement)
        if text != original:
            path.write_text(text)
            print(f"set_course_repo: {path.relative_to(ROOT)}")
    print(f"set_course_repo: the course now names {new}; commit the change")


if __name__ == "__main__":
    main()

"""The instructor's hub account is made at set-up, with its password, never at a first login: with
FirstUseAuthenticator alone, whoever logged in first as the admin's name would set its password and
become admin. scripts/setup_hub.sh runs this; workshop/course_hub.py refuses the admin's name until it has
run, and workshop/jupyterhub_config.py will not start without it.

    COURSE_HUB_ADMIN_PASSWORD=... .venv/bin/python workshop/admin_password.py   # or type it when asked

Uses the hub's settings: COURSE_HUB_DATA [/srv/course-hub] (the password file is passwords.dbm there,
as in jupyterhub_config.py) and COURSE_HUB_ADMIN [instructor]. Stored as FirstUseAuthenticator stores
every password: a bcrypt hash in that dbm file (0600, in a 0700 folder). bcrypt reads at most 72 bytes of a
password (bcrypt 5, pinned in requirements-hub.txt, raises on more; older ones cut it silently): a longer one
is refused with a message, here and at a learner's first login (course_hub.LearnerAuthenticator).
"""

from __future__ import annotations

import dbm
import getpass
import os
import sys
from pathlib import Path

MIN_LENGTH = 8  # jupyterhub_config.py's min_password_length
MAX_BYTES = 72  # all of a password that bcrypt reads


def data_dir() -> Path:
    """The hub's data folder: $COURSE_HUB_DATA, else /srv/course-hub. Set but blank is refused: Path('') is the
    current folder, which the hub would chmod 0700 and fill with its password file."""
    value = os.environ.get("COURSE_HUB_DATA", "/srv/course-hub")
    if not value.strip():
        raise SystemExit("COURSE_HUB_DATA is set but empty: set it to the hub's data folder (the default is "
                         "/srv/course-hub) or unset it")
    return Path(value)


def admin_name() -> str:
    return os.environ.get("COURSE_HUB_ADMIN", "instructor")


def passwords_path(folder: Path | None = None) -> Path:
    return (folder or data_dir()) / "passwords.dbm"


def has_password(path: Path | str, name: str) -> bool:
    try:
        with dbm.open(str(path), "r") as db:
            return name.encode() in db
    except (*dbm.error, OSError):  # no password file yet, or none can be there (its folder is a file)
        return False


def too_long(password: str) -> str | None:
    """Why bcrypt cannot take `password` whole, or None when it can."""
    size = len(password.encode("utf-8"))
    if size <= MAX_BYTES:
        return None
    return (f"the password is {size} bytes long; bcrypt reads at most {MAX_BYTES} (a plain letter or digit is 1 "
            "byte, an accented letter 2, an emoji 4): choose a shorter one")


def set_password(path: Path | str, name: str, password: str) -> None:
    """Store `name`'s password, bcrypt-hashed. Raises ValueError with a message for a password that is too
    short or too long, or a data folder that cannot be made."""
    if len(password) < MIN_LENGTH:
        raise ValueError(f"the password must have at least {MIN_LENGTH} characters")
    if problem := too_long(password):
        raise ValueError(problem)
    folder = Path(path).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        import bcrypt

        with dbm.open(str(path), "c", 0o600) as db:
            db[name.encode()] = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
    except ImportError:
        raise ValueError("bcrypt is not installed in this environment: run `bash scripts/setup_hub.sh`, which "
                         "installs the hub and sets this password") from None
    except (OSError, *dbm.error) as e:
        raise ValueError(f"the hub's data folder {folder} cannot hold the password file "
                         f"({getattr(e, 'strerror', None) or e}): set COURSE_HUB_DATA to a folder path that "
                         "root can create") from None


def main() -> None:
    name, path = admin_name(), passwords_path()
    password = os.environ.get("COURSE_HUB_ADMIN_PASSWORD")
    if password is None:
        if has_password(path, name):
            print(f"admin_password: {name!r} already has a password in {path}")
            return
        if not sys.stdin.isatty():
            sys.exit(f"admin_password: the instructor's account {name!r} needs a password before the hub starts. "
                     "Set COURSE_HUB_ADMIN_PASSWORD (at least 8 characters) or run this in a terminal to type it.")
        password = getpass.getpass(f"password for the hub's instructor account {name!r}: ")
    try:
        set_password(path, name, password)
    except ValueError as e:
        sys.exit(f"admin_password: {e}")
    print(f"admin_password: {name!r} can now log in with its password (stored hashed in {path})")


if __name__ == "__main__":
    main()

"""A URL as it may be printed: its user:password and the values of its query string hidden. The one place
that hides them, for scripts/torch_cpu.sh (`python scripts/url_shown.py <url>`, or `--filter` to pass pip's
output through: pip prints an index's query string in its warnings) and benchmarks/bench_install.py.

pip reads the user:password up to the LAST '@' before the host (a password may hold '@'), so the hiding
cuts there too; a token in the query string (`?token=...`) is a secret as well.
"""

from __future__ import annotations

import re
import sys


def shown(url: str) -> str:
    """`url` with `user:password@` and every query value replaced by ****; text that is no URL is unchanged.
    Several URLs separated by spaces (pip's extra-index-url) are each hidden."""
    return re.sub(r"\S+", lambda m: _one(m.group()), url)


def _one(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    if "@" in netloc:
        netloc = "****@" + netloc.rpartition("@")[2]  # the last '@', as pip splits it
    path, q, query = tail.partition("?")
    if q:
        query, hash_, fragment = query.partition("#")
        query = "&".join(part.split("=", 1)[0] + "=****" if "=" in part else ("****" if part else part)
                         for part in query.split("&"))
        path += q + query + hash_ + fragment
    return f"{scheme}{sep}{netloc}{path}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--filter"]:
        for line in sys.stdin:
            print(shown(line), end="", flush=True)
    else:
        print(shown(" ".join(sys.argv[1:])))

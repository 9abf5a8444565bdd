"""``python -m midtrace.store_check STORE``: open a store read-only as the dashboard will and read
what its first page reads; if that fails, print one line saying why and exit 3.

`midtrace dashboard` runs it in a child process for a ClickHouse store: chdb opens a folder
in one process only, and that process must be the dashboard's, not the command's.
"""

from __future__ import annotations

import sys

from midtrace.client import ClientError, open_client


def main(argv: list[str]) -> int:
    (store,) = argv
    try:
        client = open_client(db=store)
        try:
            client.view("overview")
        finally:
            client.close()
    except ClientError as e:
        print(e, file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

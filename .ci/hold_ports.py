"""Hold TCP ports on loopback for the whole CI run, as an OpenTelemetry Collector (4317, 4318)
or another Streamlit app (8501) would on a user's machine: the suite must pass beside them.

Usage: python3 hold_ports.py READY_FILE PORT...  (runs until killed)
"""

import signal
import socket
import sys
from pathlib import Path

held = []
for port in map(int, sys.argv[2:]):
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
    except OSError as e:
        print(f"hold_ports: {port} is already held by something else ({e})", file=sys.stderr)
        continue
    held.append(sock)
print(f"hold_ports: holding {', '.join(str(s.getsockname()[1]) for s in held)}", file=sys.stderr)
Path(sys.argv[1]).write_text("ready\n")
signal.sigwait({signal.SIGTERM, signal.SIGINT})

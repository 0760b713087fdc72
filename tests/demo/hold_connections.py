# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A hostile cluster user's stall attempt on the pull server (make demo-ondemand, step 4): hold IDLE
connections that send nothing and TRICKLE ones that send a byte a second, opening a new one whenever
the server cuts one off, until the stop file appears or LIMIT seconds pass. Prints what it held.

    python3 hold_connections.py ADDRESS PORT [IDLE] [TRICKLE] [LIMIT]
"""

import os
import socket
import sys
import time


def connect(address, port):
    try:
        conn = socket.create_connection((address, port), 5)
        conn.setblocking(False)
        return conn
    except OSError:
        return None


def closed(conn):
    """The server ended this connection (or it never opened)."""
    if conn is None:
        return True
    try:
        return conn.recv(1) == b''
    except BlockingIOError:
        return False
    except OSError:
        return True


def main():
    address, port = sys.argv[1], int(sys.argv[2])
    idle, trickle = int(sys.argv[3]) if len(sys.argv) > 3 else 20, int(sys.argv[4]) if len(sys.argv) > 4 else 5
    limit = float(sys.argv[5]) if len(sys.argv) > 5 else 900
    stop = os.path.expanduser('~/hold_connections.stop')
    conns = [connect(address, port) for dummy in range(idle + trickle)]
    opened, cut, refused = len(conns), 0, sum(c is None for c in conns)
    start = time.monotonic()
    print('holding %d idle and %d trickling connections to %s:%d' % (idle, trickle, address, port), flush=True)
    while time.monotonic() - start < limit and not os.path.exists(stop):
        for i, conn in enumerate(conns):
            if i >= idle and conn is not None:
                try:
                    conn.send(b'\x16')
                except OSError:
                    pass
            if closed(conn):
                cut += conn is not None
                if conn is not None:
                    conn.close()
                conns[i] = connect(address, port)
                opened += 1
                refused += conns[i] is None
        time.sleep(1)
    held = sum(c is not None for c in conns)
    print('held for %.0f s: %d connections opened, %d cut off by the server, %d not accepted, %d open at the end'
          % (time.monotonic() - start, opened, cut, refused, held), flush=True)


if __name__ == '__main__':
    main()

"""PyTorch's own c10d TCPStore, served for graphstep's store client tests.

Usage: c10d_store_server.py libuv|legacy
Prints the port it listens on, then answers one line per command read from standard input,
through PyTorch's own client of the same store:
  get KEY         -> the value in hex
  set KEY HEX     -> "ok"
  add KEY N       -> the sum
It stops at the end of standard input.
"""

import datetime
import sys

from torch.distributed import TCPStore


def main() -> None:
    store = TCPStore(
        "127.0.0.1",
        0,
        is_master=True,
        wait_for_workers=False,
        use_libuv=sys.argv[1] == "libuv",
        timeout=datetime.timedelta(seconds=30),
    )
    print(store.port, flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[0] == "get":
            print(store.get(words[1]).hex(), flush=True)
        elif words[0] == "set":
            store.set(words[1], bytes.fromhex(words[2]))
            print("ok", flush=True)
        elif words[0] == "add":
            print(store.add(words[1], int(words[2])), flush=True)
        else:
            print(f"unknown command {words[0]}", flush=True)


if __name__ == "__main__":
    main()

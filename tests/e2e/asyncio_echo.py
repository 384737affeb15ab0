#!/usr/bin/env python3
"""asyncio echo server and client for the e2e tests.

server --port-file F --conns K --hashes OUT [--host H]
    Echoes every connection; after K connections have ended writes one line
    "bytes=N sha256=X" per connection (sorted) to OUT and exits 0.
client --port P --conns C --bytes N --seed S [--host H]
    C concurrent connections; each sends N bytes of random.Random(S+i) data
    in random-sized writes while reading the echo, half-closes, reads to EOF,
    and checks the echo.  Prints per connection
    "conn I bytes=N sent_sha256=X recv_sha256=Y" and "PASS"; exits 1 on any
    mismatch.
"""
import argparse
import asyncio
import hashlib
import os
import random
import sys


async def server(args):
    done = []
    finished = asyncio.Event()

    async def handle(reader, writer):
        h = hashlib.sha256()
        n = 0
        while True:
            data = await reader.read(65536)
            if not data:
                break
            h.update(data)
            n += len(data)
            writer.write(data)
            await writer.drain()
        writer.write_eof()
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        done.append("bytes=%d sha256=%s" % (n, h.hexdigest()))
        if len(done) == args.conns:
            finished.set()

    srv = await asyncio.start_server(handle, args.host, 0)
    port = srv.sockets[0].getsockname()[1]
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, args.port_file)
    await finished.wait()
    srv.close()
    await srv.wait_closed()
    with open(args.hashes, "w") as f:
        f.write("".join(line + "\n" for line in sorted(done)))
    return 0


async def one_client(args, i):
    rnd = random.Random(args.seed * 1000 + i)
    data = rnd.randbytes(args.bytes)
    reader, writer = await asyncio.open_connection(args.host, args.port)

    async def send():
        off = 0
        while off < len(data):
            k = rnd.randint(1, 200000)
            writer.write(data[off:off + k])
            off += k
            await writer.drain()
        writer.write_eof()

    async def recv():
        got = bytearray()
        while True:
            chunk = await reader.read(rnd.randint(1, 131072))
            if not chunk:
                break
            got += chunk
        return bytes(got)

    _, got = await asyncio.gather(send(), recv())
    writer.close()
    await writer.wait_closed()
    sent_h = hashlib.sha256(data).hexdigest()
    recv_h = hashlib.sha256(got).hexdigest()
    ok = got == data
    if not ok:
        bad = next((j for j in range(min(len(got), len(data))) if got[j] != data[j]),
                   min(len(got), len(data)))
        print("conn %d: echo differs at offset %d (got %d of %d bytes)"
              % (i, bad, len(got), len(data)))
    return ok, "conn %d bytes=%d sent_sha256=%s recv_sha256=%s" % (i, len(got), sent_h, recv_h)


async def client(args):
    res = await asyncio.gather(*(one_client(args, i) for i in range(args.conns)))
    for _, line in res:
        print(line)
    if all(ok for ok, _ in res):
        print("PASS asyncio client conns=%d bytes=%d" % (args.conns, args.bytes))
        return 0
    print("FAIL asyncio client")
    return 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["server", "client"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int)
    p.add_argument("--port-file")
    p.add_argument("--hashes")
    p.add_argument("--conns", type=int, default=4)
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    return asyncio.run(server(args) if args.role == "server" else client(args))


if __name__ == "__main__":
    sys.exit(main())

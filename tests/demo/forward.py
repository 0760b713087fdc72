# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A TCP forwarder for the on-demand demo: the stand-ins reach the simulator (API and metadata
service, which listen on 127.0.0.1) at this machine's address on the demo's podman network.

    python3 tests/demo/forward.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT
"""
import asyncio
import sys


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def main(listen_host, listen_port, target_host, target_port):
    async def handle(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(target_host, int(target_port))
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def serve():
        server = await asyncio.start_server(handle, listen_host, int(listen_port))
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


if __name__ == '__main__':
    main(*sys.argv[1:5])

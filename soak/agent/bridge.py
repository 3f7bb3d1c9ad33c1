"""Inside an agent's jail with no network of its own: loopback port P reaches soak's proxy through its unix socket,
and nothing else is reachable. Runs the agent as its child and exits with its status.

    python -m soak.agent.bridge SOCKET PORT -- AGENT ARGV...

The bridge is soak's code but runs inside the jail, so the agent could kill it; it would only cut itself off.
"""

import asyncio
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def bridge(socket_path: str, port: int, argv: list[str]) -> int:
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    server = await asyncio.start_server(forward, "127.0.0.1", port)
    async with server:
        agent = await asyncio.create_subprocess_exec(*argv)
        code = await agent.wait()
        return code if code >= 0 else 128 - code  # a signal's death as a shell reports it


def main() -> None:
    socket_path, port, separator, *argv = sys.argv[1:]
    if separator != "--" or not argv:
        sys.exit("usage: python -m soak.agent.bridge SOCKET PORT -- AGENT ARGV...")
    sys.exit(asyncio.run(bridge(socket_path, int(port), argv)))


if __name__ == "__main__":
    main()

"""Downloads a URL with aioquic's HTTP/3 client and prints `STATUS BYTES`.

A third-party HTTP/3 client for the interop test: nothing here is ours but
the thirty lines that drive aioquic's public API.
"""

import asyncio
import ssl
import sys
from urllib.parse import urlparse

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.done = asyncio.Event()
        self.status = None
        self.received = 0

    def quic_event_received(self, event):
        for ev in self.h3.handle_event(event):
            if isinstance(ev, HeadersReceived):
                for name, value in ev.headers:
                    if name == b":status":
                        self.status = int(value)
            elif isinstance(ev, DataReceived):
                self.received += len(ev.data)
            if getattr(ev, "stream_ended", False):
                self.done.set()

    async def get(self, authority, path):
        stream = self._quic.get_next_available_stream_id()
        self.h3.send_headers(
            stream,
            [(b":method", b"GET"), (b":scheme", b"https"),
             (b":authority", authority.encode()), (b":path", path.encode())],
            end_stream=True,
        )
        self.transmit()
        await self.done.wait()


async def main(url):
    u = urlparse(url)
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE)
    async with connect(u.hostname, u.port, configuration=config, create_protocol=Client) as client:
        await asyncio.wait_for(client.get(u.netloc, u.path), 60)
        print(client.status, client.received)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))

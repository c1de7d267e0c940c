"""A minimal aioquic HTTP/3 server: GET /bytes/N answers N bytes, anything
else 404. Prints `listening on HOST:PORT` once ready. Used by the interop
test as a server no one here wrote.

usage: aioquic_server.py CERT KEY
"""

import asyncio
import sys

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ProtocolNegotiated


class Server(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = None

    def quic_event_received(self, event):
        if isinstance(event, ProtocolNegotiated):
            self.h3 = H3Connection(self._quic)
        if self.h3 is None:
            return
        for ev in self.h3.handle_event(event):
            if isinstance(ev, HeadersReceived):
                path = dict(ev.headers).get(b":path", b"").decode()
                size = path[len("/bytes/"):] if path.startswith("/bytes/") else ""
                if size.isdigit():
                    n = int(size)
                    self.h3.send_headers(ev.stream_id, [(b":status", b"200"), (b"content-length", str(n).encode())])
                    self.h3.send_data(ev.stream_id, b"a" * n, end_stream=True)
                else:
                    self.h3.send_headers(ev.stream_id, [(b":status", b"404")], end_stream=True)
                self.transmit()


async def main(cert, key):
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN, max_datagram_frame_size=None)
    config.load_cert_chain(cert, key)
    server = await serve("127.0.0.1", 0, configuration=config, create_protocol=Server)
    host, port = server._transport.get_extra_info("sockname")[:2]
    print(f"listening on {host}:{port}", flush=True)
    await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

"""The HTTP servers the tests run beside sbxd (fake models, skill indexes, egress upstreams,
package registries). A request that ends in an expected refusal -- the egress proxy
refusing an upstream's certificate, a client (sbxd) closing the connection early, a
timeout -- is what the test checks, not a failure of the server: socketserver's default
handle_error would print its traceback into `make test`'s output. Anything else is still
printed."""

import http.server
import socket
import ssl
import sys

EXPECTED = (ConnectionError, ssl.SSLError, TimeoutError, socket.timeout)


class QuietHTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], EXPECTED):
            return
        super().handle_error(request, client_address)

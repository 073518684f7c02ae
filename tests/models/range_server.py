#!/usr/bin/env python3
"""A static file server on 127.0.0.1 for the model download test: serves DIR, answers
"Range: bytes=N-" and "bytes=N-M" with 206 (Python's http.server does not), writes the port it
bound to PORT_FILE and one line per request ("GET /name bytes=N-" or "GET /name -") to LOG_FILE.

    range_server.py DIR PORT_FILE LOG_FILE
"""
import http.server
import os
import re
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):  # quiet; the request log is LOG_FILE
        pass

    def do_GET(self):
        path = os.path.join(ROOT, os.path.basename(self.path))
        want = self.headers.get("Range")
        with open(LOG, "a") as log:
            log.write(f"GET {self.path} {want or '-'}\n")
        if not os.path.isfile(path):
            self.send_error(404)
            return
        size = os.path.getsize(path)
        begin, end = 0, size - 1
        if want:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", want)
            if not m or int(m.group(1)) >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            begin = int(m.group(1))
            if m.group(2):
                end = min(int(m.group(2)), size - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {begin}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - begin + 1))
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(begin)
            self.wfile.write(f.read(end - begin + 1))


ROOT, PORT_FILE, LOG = sys.argv[1], sys.argv[2], sys.argv[3]
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()

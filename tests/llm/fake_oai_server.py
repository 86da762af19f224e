#!/usr/bin/env python3
"""A deliberately broken OpenAI-style server for test_server_load.py: bench/llm/server_load.py
must report each of its faults as a failure. fake_oai_server.py MODE PORTFILE, MODE one of
  garbage     completions answer 200 with a body that is not JSON
  drop        every third completion's connection is closed without an answer
  no_done     streams end without data: [DONE]
  health      /health answers 503
  leak        every request keeps 2 MiB (resident memory grows)
  accept_bad  everything (malformed requests too) answers 200 with a valid completion
Writes its port to PORTFILE once it listens."""
import json
import socketserver
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
HOLD = []
COUNT = [0]


def completion(chat):
    c = {"index": 0, "finish_reason": "length"}
    if chat:
        c["message"] = {"role": "assistant", "content": "hi"}
    else:
        c["text"] = "hi"
    return {"id": "x", "object": "chat.completion" if chat else "text_completion",
            "choices": [c]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self.send(503 if MODE == "health" else 200, b'{"status":"ok"}')
        elif self.path == "/v1/models":
            self.send(200, b'{"data":[{"id":"fake"}]}')
        else:
            self.send(404, b'{"error":{"message":"no"}}')

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        if n > (1 << 20) and MODE != "accept_bad":
            return self.send(413, b'{"error":{"message":"too large"}}')
        COUNT[0] += 1
        if MODE == "leak":
            HOLD.append(bytearray(b"x" * (2 << 20)))
        try:
            req = json.loads(raw)
            ok = isinstance(req, dict) and isinstance(req.get("max_tokens"), int) and \
                isinstance(req.get("stream", False), bool) and \
                (isinstance(req.get("prompt"), str) or isinstance(req.get("messages"), list))
        except ValueError:
            req, ok = {}, False
        if not ok and MODE != "accept_bad":
            return self.send(400, b'{"error":{"message":"bad request"}}')
        req = req if isinstance(req, dict) else {}
        chat = "chat" in self.path
        if MODE == "garbage":
            return self.send(200, b"<html>not json</html>")
        if MODE == "drop" and COUNT[0] % 3 == 0:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if req.get("stream") is True:
            ev = json.dumps({"choices": [{"index": 0, "text": "hi", "delta": {"content": "hi"}}]})
            body = f"data: {ev}\n\n".encode()
            if MODE != "no_done":
                body += b"data: [DONE]\n\n"
            return self.send(200, body, "text/event-stream")
        self.send(200, json.dumps(completion(chat)).encode())


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        pass  # clients that hang up (the tool's half-sent headers) are expected


if __name__ == "__main__":
    srv = Server(("127.0.0.1", 0), Handler)
    with open(sys.argv[2], "w") as f:
        f.write(str(srv.server_address[1]))
    srv.serve_forever()

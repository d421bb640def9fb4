#!/usr/bin/env python3
"""Sync hook of the PodService CompositeController (standard library only).

A PodService parent (spec.image, spec.port) gets one Pod and one Service,
and a status that reports what the hook observed. This is the hook of the
Metacontroller tutorial, unchanged in shape: it runs the same against
Metacontroller and against dcontroller.

Usage: podservice_hook.py [PORT]   (0 or nothing: pick a free port)
The first line printed is "listening on PORT". GET /calls returns the number
of sync calls served so far.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CALLS = 0
LOCK = threading.Lock()


def sync(request):
    parent = request["parent"]
    name = parent["metadata"]["name"]
    spec = parent.get("spec", {})
    image = spec.get("image", "nginx:1.27")
    port = int(spec.get("port", 80))
    labels = {"app": name}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name + "-pod", "labels": labels},
        "spec": {"containers": [{"name": "web", "image": image,
                                 "ports": [{"containerPort": port}]}]},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name + "-svc", "labels": labels},
        "spec": {"selector": labels, "ports": [{"port": port, "targetPort": port}]},
    }
    children = request["children"]
    status = {
        "pods": len(children.get("Pod.v1", {})),
        "services": len(children.get("Service.v1", {})),
        "image": image,
    }
    return {"status": status, "children": [pod, service]}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        with LOCK:
            body = json.dumps({"calls": CALLS}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global CALLS
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length))
        with LOCK:
            CALLS += 1
        body = json.dumps(sync(request)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Protocol double of the Kubernetes API server's pod and node lists, for the exporter's real
client (exporter/kube): HTTPS on 127.0.0.1 (its own CA and server certificate, made with openssl
at start), GET /api/v1/pods and /api/v1/nodes, as the API server answers them (core/v1 PodList,
NodeList or meta/v1 PartialObjectMetadataList; errors as a v1 Status).

usage: kube_api_double.py --dir DIR --body FILE --token-file FILE --node NODE [--nodes FILE] [--log FILE]
  DIR/ca.crt         the CA the exporter must trust (written at start)
  --body FILE        what a good request gets: read at each request, so a test can change it.
                     A PodList JSON object is filtered by spec.nodeName as the field selector asks
                     (the server's behaviour); any other bytes (garbage, invalid UTF-8, oversized)
                     are served as they are, status 200.
  --token-file FILE  the one bearer token accepted, read at each request (rotation): else 401
  --node NODE        the field selector a request must carry (spec.nodeName=NODE): else 400
  --nodes FILE       the nodes (a JSON list of Node objects), read at each request. GET /api/v1/nodes
                     selects by labelSelector (`key` or `key=value`), pages by `limit` with a
                     `continue` token the server made (any other token: 410 Gone, as an expired
                     one), and answers PartialObjectMetadataList (metadata only) when the Accept
                     header asks for it, else a NodeList. Without --nodes: 404.
                     Written as {"mode": M, "nodes": [...]}: M "nodelist" answers NodeList whatever
                     the Accept (a server without metadata-only lists); "loop" makes every page's
                     continue token the same (a broken pager); "expire" hands out a token that
                     then gets 410; "forbid" answers 403; "garbage" answers 200 with bytes that
                     are not JSON.
  --log FILE         one JSON line per request: {"path", "query", "token_ok", "accept", "status"}
Prints "ready PORT" when it listens. Runs until SIGTERM."""
import argparse
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def make_certs(d):
    """A CA and a server certificate for IP 127.0.0.1 signed by it (EC P-256: fast to make)."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ca_key, ca, key, csr, crt = (os.path.join(d, n) for n in ("ca.key", "ca.crt", "server.key", "server.csr",
                                                              "server.crt"))
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", ca_key,
        "-out", ca, "-days", "2", "-subj", "/CN=double-kubernetes-ca")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=kube-apiserver")
    ext = os.path.join(d, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\n")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", crt, "-days", "2",
        "-extfile", ext)
    return crt, key


def status(code, reason, message):
    """A v1 Status, as the API server writes its errors."""
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code}).encode()


def main():
    ap = argparse.ArgumentParser()
    for a in ("--dir", "--body", "--token-file", "--node"):
        ap.add_argument(a, required=True)
    ap.add_argument("--log")
    ap.add_argument("--nodes")
    a = ap.parse_args()
    crt, key = make_certs(a.dir)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, code, body, log):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            if a.log:
                log["status"] = code
                with lock, open(a.log, "a") as f:
                    f.write(json.dumps(log) + "\n")

        def do_GET(self):
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            with open(a.token_file) as f:
                want = f.read().strip()
            token_ok = self.headers.get("Authorization", "") == "Bearer " + want
            log = {"path": url.path, "query": query, "token_ok": token_ok, "accept": self.headers.get("Accept", "")}
            if not token_ok:
                return self.reply(401, status(401, "Unauthorized", "Unauthorized"), log)
            if url.path == "/api/v1/nodes" and a.nodes:
                return self.nodes(query, log)
            if url.path != "/api/v1/pods":
                return self.reply(404, status(404, "NotFound", "the server could not find the requested resource"), log)
            if query.get("fieldSelector") != ["spec.nodeName=" + a.node]:
                return self.reply(400, status(400, "BadRequest", "a node's exporter lists its own node's pods"), log)
            with open(a.body, "rb") as f:
                body = f.read()
            try:
                doc = json.loads(body)
                if isinstance(doc, dict) and doc.get("kind") == "PodList":
                    doc["items"] = [p for p in doc.get("items", []) if p.get("spec", {}).get("nodeName") == a.node]
                    body = json.dumps(doc).encode()
            except (ValueError, UnicodeDecodeError):
                pass
            self.reply(200, body, log)

        def nodes(self, query, log):
            with open(a.nodes) as f:
                nodes = json.load(f)
            mode = ""
            if isinstance(nodes, dict):
                mode, nodes = nodes.get("mode", ""), nodes.get("nodes", [])
            if mode == "loop":
                doc = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"continue": "page:0"}, "items": []}
                return self.reply(200, json.dumps(doc).encode(), log)
            if mode == "forbid":
                return self.reply(403, status(403, "Forbidden", 'nodes is forbidden: User "system:serviceaccount:'
                                              'rdma:rdma-exporter" cannot list resource "nodes" in API group ""'), log)
            if mode == "garbage":
                return self.reply(200, b"<html>proxy error</html>", log)
            selector = query.get("labelSelector", [""])[0]
            if selector:
                key, _, want = selector.partition("=")
                nodes = [n for n in nodes if key in n["metadata"].get("labels", {}) and
                         (not want or n["metadata"]["labels"][key] == want)]
            start = 0
            token = query.get("continue", [""])[0]
            if token:
                if not token.startswith("page:") or not token[5:].isdigit():
                    return self.reply(410, status(410, "Expired", "The provided continue parameter is too old"), log)
                start = int(token[5:])
            limit = int(query.get("limit", ["0"])[0]) or len(nodes)
            page = nodes[start:start + limit]
            meta = {"resourceVersion": "5001"}
            if start + limit < len(nodes):
                meta["continue"] = "stale" if mode == "expire" else "page:%d" % (start + limit)
            if mode != "nodelist" and "as=PartialObjectMetadataList" in self.headers.get("Accept", ""):
                doc = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                       "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                  "metadata": n["metadata"]} for n in page]}
            else:
                doc = {"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": page}
            self.reply(200, json.dumps(doc).encode(), log)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", server.server_address[1], flush=True)
    signal.sigwait([signal.SIGTERM, signal.SIGINT])
    server.shutdown()


def pod(name, namespace, uid, node, containers, mirror_uid=None):
    """A core/v1 Pod as the API serves it (the fields a kubelet-run pod has, trimmed to the shape)."""
    meta = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "4711",
            "creationTimestamp": "2026-12-01T10:00:00Z", "labels": {"app": name}}
    if mirror_uid:
        meta["annotations"] = {"kubernetes.io/config.mirror": mirror_uid, "kubernetes.io/config.source": "file"}
    return {"metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": n, "image": "busybox"} for n, _ in containers]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": n, "containerID": cid, "ready": True, "restartCount": 0, "image": "busybox",
                 "state": {"running": {"startedAt": "2026-12-01T10:00:01Z"}}} for n, cid in containers]}}


def node(name, labels):
    """A core/v1 Node as the API serves it (metadata, and a status no metadata-only list carries)."""
    return {"metadata": {"name": name, "uid": "uid-" + name, "resourceVersion": "5000", "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "status": {"capacity": {"cpu": "224", "nvidia.com/gpu": "8"},
                       "addresses": [{"type": "Hostname", "address": name}]}}


def pod_list(*pods):
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "4712"}, "items": list(pods)}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--pod-list":
        # For shell tests (one interpreter start: they run under TCG):
        #   kube_api_double.py --pod-list NODE UID NAMESPACE NAME CONTAINER_ID CONTAINER OUT
        # writes OUT.json (the pod on NODE, another on another node), OUT-escaped.json (the container
        # named "\u00ff\u00fe": valid UTF-8, not a name the API server admits) and OUT-raw.json (the
        # container named with the raw bytes ff fe: not UTF-8).
        node, uid, ns, name, cid, cname, out = sys.argv[2:9]
        doc = json.dumps(pod_list(pod(name, ns, uid, node, [(cname, "containerd://" + cid)]),
                                  pod("elsewhere", ns, "9e2f7a1c-0000-4000-8000-000000000001", "node-other",
                                      [("worker", "containerd://" + "e" * 64)]))).encode()
        quoted = json.dumps(cname).encode()
        for suffix, data in (("", doc), ("-escaped", doc.replace(quoted, b'"\\u00ff\\u00fe"')),
                             ("-raw", doc.replace(quoted, b'"\xff\xfe"'))):
            with open(out + suffix + ".json", "wb") as f:
                f.write(data)
        sys.exit(0)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
    main()

#!/usr/bin/env python3
"""What the rendered manifests must say (security review and wiring), beyond schema validity.

usage: check_k8s.py BASE.yaml OVERLAY.yaml EXPORTER_BINARY REPO_ROOT [PROBER.yaml [CRI_OVERLAY.yaml [GPU_8X8.yaml]]]
The ConfigMaps' rdma_exporter.yml are loaded by the real exporter (it must start and answer
/healthz on loopback), and the dashboards ConfigMaps must hold the files of dashboards/."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

base_f, overlay_f, exporter, root = sys.argv[1:5]
prober_f = sys.argv[5] if len(sys.argv) > 5 else None
cri_f = sys.argv[6] if len(sys.argv) > 6 else None
gpu_f = sys.argv[7] if len(sys.argv) > 7 else None
errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def load(path):
    return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(open(path)) if o}


def one(objs, kind):
    found = [o for (k, _), o in objs.items() if k == kind]
    check(len(found) == 1, "expected one %s, found %d" % (kind, len(found)))
    return found[0] if found else {}


def exporter_config(objs):
    cms = [o for (k, n), o in objs.items() if k == "ConfigMap" and n.startswith("rdma-exporter-config")]
    check(len(cms) == 1, "expected one rdma-exporter-config ConfigMap")
    return cms[0] if cms else {"metadata": {"name": ""}, "data": {}}


def check_common(objs, variant):
    ds = one(objs, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    sc = c.get("securityContext", {})
    p = variant + ": "
    cluster_scoped = ("Namespace", "ClusterRole", "ClusterRoleBinding")
    check(all(o["metadata"].get("namespace") == "rdma-exporter"
              for (k, _), o in objs.items() if k not in cluster_scoped), p + "every object in namespace rdma-exporter")
    check(not any("namespace" in o["metadata"] for (k, _), o in objs.items() if k in cluster_scoped[1:]),
          p + "cluster-scoped RBAC objects carry no namespace")
    check(pod.get("hostNetwork") is True, p + "hostNetwork")
    check(pod.get("dnsPolicy") == "ClusterFirstWithHostNet", p + "dnsPolicy ClusterFirstWithHostNet")
    check(pod.get("priorityClassName") == "system-node-critical", p + "priorityClassName")
    check({"operator": "Exists"} in pod.get("tolerations", []), p + "tolerate every taint")
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    keys = {e["key"] for t in terms for e in t["matchExpressions"]}
    check("feature.node.kubernetes.io/rdma.capable" in keys, p + "node affinity on NFD rdma.capable")
    check(sc.get("readOnlyRootFilesystem") is True, p + "readOnlyRootFilesystem")
    check(sc.get("allowPrivilegeEscalation") is False, p + "allowPrivilegeEscalation false")
    check(sc.get("privileged") in (None, False), p + "not privileged")
    check(sc.get("capabilities", {}).get("drop") == ["ALL"], p + "drop ALL capabilities")
    check(pod.get("automountServiceAccountToken") is False, p + "no service account token")
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    for name, m in mounts.items():
        if "hostPath" in vols.get(name, {}):
            check(m.get("readOnly") is True, p + "hostPath %s must be mounted read-only" % name)
    check(any(v.get("hostPath", {}).get("path") == "/sys" for v in vols.values()), p + "/sys hostPath")
    check(not any(v.get("hostPath", {}).get("path", "").startswith("/dev") for v in vols.values()),
          p + "no /dev hostPath (devices come from the device plugin)")
    cm = exporter_config(objs)
    check(vols.get("config", {}).get("configMap", {}).get("name") == cm["metadata"]["name"],
          p + "DaemonSet mounts the generated config ConfigMap")
    check("--config.file=/etc/rdma_exporter/rdma_exporter.yml" in c.get("args", []), p + "--config.file")
    check(mounts.get("config", {}).get("mountPath") == "/etc/rdma_exporter", p + "config mount path")
    check(c["ports"][0]["containerPort"] == 9661, p + "port 9661")
    svc = one(objs, "Service")
    check(svc["spec"].get("clusterIP") == "None", p + "headless Service")
    check(svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
          p + "Service selects the DaemonSet's pods")
    sm = one(objs, "ServiceMonitor")
    check(sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(),
          p + "ServiceMonitor selects the Service")
    check(sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"], p + "ServiceMonitor port name")
    pr = one(objs, "PrometheusRule")
    rules = yaml.safe_load(open(os.path.join(root, "deploy", "prometheus", "rdma-exporter.rules.yml")))
    check(pr.get("spec") == rules, p + "PrometheusRule == deploy/prometheus/rdma-exporter.rules.yml")
    dash = {n: o for (k, n), o in objs.items() if k == "ConfigMap" and n.startswith("rdma-dashboard-")}
    files = sorted(f for f in os.listdir(os.path.join(root, "dashboards")) if f.endswith(".json"))
    got = sorted(f for o in dash.values() for f in o["data"])
    check(got == files, p + "dashboard ConfigMaps %s != dashboards/%s" % (got, files))
    for n, o in dash.items():
        check(o["metadata"].get("labels", {}).get("grafana_dashboard") == "1", p + n + " label grafana_dashboard=1")
        for f, text in o["data"].items():
            check(json.loads(text) == json.load(open(os.path.join(root, "dashboards", f))), p + n + " content")
    return ds, pod, c, cm


def exporter_loads(config_text, what, env=None, args=()):
    """The config starts the real exporter (flags override listen address and sysfs); env: what the
    pod's environment adds (the kubelet's KUBERNETES_SERVICE_*, the downward API's NODE_NAME)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "rdma_exporter.yml")
        open(cfg, "w").write(config_text)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        log = open(os.path.join(tmp, "log"), "w+")
        proc = subprocess.Popen([exporter, "--config.file=" + cfg, "--web.listen-address=127.0.0.1:%d" % port,
                                 "--path.sysfs=" + tmp, *args], stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})
        ok = False
        try:
            for _ in range(100):
                if proc.poll() is not None:
                    break
                try:
                    ok = urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=2).status == 200
                    break
                except OSError:
                    time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
        log.seek(0)
        check(ok, "%s: the exporter does not start with it:\n%s" % (what, log.read()[-800:]))


base, overlay = load(base_f), load(overlay_f)
ds, pod, c, cm = check_common(base, "base")
check(pod["securityContext"].get("runAsNonRoot") is True and pod["securityContext"].get("runAsUser") == 65534,
      "base: runs as nobody (non-root)")
check("add" not in c["securityContext"]["capabilities"], "base: adds no capability")
check(not any(k.startswith("rdma/") for k in c.get("resources", {}).get("limits", {})), "base: no RDMA device")
check("/host/sys" in cm["data"]["rdma_exporter.yml"], "base: config reads /host/sys")
check(not pod.get("hostPID"), "base: no host PID namespace")
check(not any(v.get("hostPath", {}).get("path") == "/proc" for v in pod.get("volumes", [])), "base: no host /proc")
exporter_loads(cm["data"]["rdma_exporter.yml"], "base ConfigMap")

ds, pod, c, cm = check_common(overlay, "rdma-devices")
check(c["securityContext"]["capabilities"].get("add") == ["IPC_LOCK"], "rdma-devices: adds IPC_LOCK only")
check(any(k.startswith("rdma/") for k in c["resources"]["limits"]), "rdma-devices: RDMA device resource")
# The workload collector: the kernel lists QPs only to a reader that sees their owners' PIDs.
check(pod.get("hostPID") is True, "rdma-devices: hostPID (workload collector)")
proc = [v["name"] for v in pod.get("volumes", []) if v.get("hostPath", {}).get("path") == "/proc"]
proc_mounts = [m for m in c.get("volumeMounts", []) if m["name"] in proc]
check(len(proc_mounts) == 1 and proc_mounts[0].get("readOnly") is True, "rdma-devices: host /proc mounted read-only")
ocfg = yaml.safe_load(cm["data"]["rdma_exporter.yml"])
check(ocfg.get("collectors", {}).get("workload", {}).get("enabled") is True, "rdma-devices: workload collector on")
check(proc_mounts and ocfg.get("path", {}).get("procfs") == proc_mounts[0]["mountPath"],
      "rdma-devices: path.procfs is the host /proc mount")
wl = ocfg.get("collectors", {}).get("workload", {})
ro = {m["mountPath"] for m in c.get("volumeMounts", []) if m.get("readOnly") is True}
for key in ("podresources_socket",):
    check(any(str(wl.get(key, "")).startswith(d + "/") for d in ro), "rdma-devices: %s under a read-only mount" % key)
# Least privilege for the names: the Kubernetes API with a read-only role, never the container
# runtime's socket by default (it serves the runtime's whole API: a privileged container = root).
RUNTIME_SOCKET_DIRS = ("/run/containerd", "/var/run/containerd", "/run/crio", "/var/run/crio", "/run/docker",
                       "/var/run/docker", "/run/docker.sock", "/var/run/docker.sock", "/run", "/var/run",
                       "/run/k3s/containerd", "/var/run/cri-dockerd.sock")


def runtime_mounts(pod):
    return [v["name"] for v in pod.get("volumes", [])
            if v.get("hostPath", {}).get("path", "").rstrip("/") in RUNTIME_SOCKET_DIRS]


def token_volume(pod, c):
    """The projected service account token, its mount and the RBAC that lets it read pods."""
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        if m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount":
            return vols.get(m["name"], {}), m
    return {}, {}


check(wl.get("names") == "kubernetes", "rdma-devices: workload names from the Kubernetes API")
check("cri_socket" not in wl, "rdma-devices: no CRI socket configured")
check(not runtime_mounts(pod), "rdma-devices: no container runtime socket mounted (%s)" % runtime_mounts(pod))
tv, tm = token_volume(pod, c)
srcs = tv.get("projected", {}).get("sources", [])
check(any("serviceAccountToken" in x for x in srcs) and tm.get("readOnly") is True,
      "rdma-devices: the service account token projected read-only at the in-cluster path")
check(any(x.get("configMap", {}).get("name") == "kube-root-ca.crt" for x in srcs), "rdma-devices: the cluster CA")
check(any(e.get("name") == "NODE_NAME" and e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName"
          for e in c.get("env", [])), "rdma-devices: NODE_NAME from the downward API")
role = overlay.get(("ClusterRole", "rdma-exporter-pod-reader"), {})
check(role.get("rules") == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
      "rdma-devices: ClusterRole reads pods only (get/list/watch), got %s" % role.get("rules"))
binding = overlay.get(("ClusterRoleBinding", "rdma-exporter-pod-reader"), {})
check(binding.get("roleRef", {}).get("name") == "rdma-exporter-pod-reader" and
      binding.get("subjects") == [{"kind": "ServiceAccount", "name": pod.get("serviceAccountName"),
                                   "namespace": "rdma-exporter"}],
      "rdma-devices: the ClusterRole is bound to the DaemonSet's service account")
check(not [o for (k, _), o in overlay.items() if k in ("Role", "RoleBinding")] and
      [k for (k, _) in overlay if k == "ClusterRole"] == ["ClusterRole"],
      "rdma-devices: no other role")
check(not [k for (k, _) in base if k in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")],
      "base: no RBAC (reads sysfs only)")
check(not token_volume(one(base, "DaemonSet")["spec"]["template"]["spec"],
                       one(base, "DaemonSet")["spec"]["template"]["spec"]["containers"][0])[1],
      "base: no service account token mounted")
base_mounts = one(base, "DaemonSet")["spec"]["template"]["spec"]["containers"][0].get("volumeMounts", [])
check(not any(m["mountPath"].startswith(("/host/run", "/var/lib/kubelet", "/host/proc")) for m in base_mounts),
      "base: no CRI or PodResources socket, no host /proc")
POD_ENV = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1", "NODE_NAME": "node-a"}
exporter_loads(cm["data"]["rdma_exporter.yml"], "rdma-devices ConfigMap", env=POD_ENV)

if cri_f:
    # The opt-in CRI overlay: rdma-devices plus the runtime socket, names from it (flags).
    cri = load(cri_f)
    ds, cpod, cc, ccm = check_common(cri, "rdma-devices-cri")
    check(runtime_mounts(cpod) != [], "rdma-devices-cri: the runtime socket's directory is mounted")
    check("--collector.workload.names=cri" in cc.get("args", []), "rdma-devices-cri: names from the CRI")
    sock = [a.split("=", 1)[1] for a in cc.get("args", []) if a.startswith("--collector.workload.cri-socket=")]
    cro = {m["mountPath"] for m in cc.get("volumeMounts", []) if m.get("readOnly") is True}
    check(len(sock) == 1 and any(sock[0].startswith(d + "/") for d in cro),
          "rdma-devices-cri: cri-socket under a read-only mount")
    exporter_loads(ccm["data"]["rdma_exporter.yml"], "rdma-devices-cri ConfigMap", env=POD_ENV,
                   args=[a for a in cc.get("args", []) if not a.startswith("--config.file")])
exporter_loads(open(os.path.join(root, "deploy", "rdma_exporter.yml")).read(), "deploy/rdma_exporter.yml")


def check_prober(objs):
    """overlays/prober: the mesh with peers from the headless Service and a user-made Secret."""
    ds, pod, c, cm = check_common(objs, "prober")
    p = "prober: "
    cfg = yaml.safe_load(cm["data"]["rdma_exporter.yml"])
    pr = cfg.get("collectors", {}).get("prober", {})
    check(pr.get("enabled") is True, p + "prober collector on")
    svc = one(objs, "Service")
    ns = svc["metadata"]["namespace"]
    check(pr.get("dns_name", "").startswith("%s.%s.svc" % (svc["metadata"]["name"], ns)),
          p + "peers from the headless Service's DNS name")
    listen_port = int(str(pr.get("listen_address", ":9662")).rsplit(":", 1)[1])
    check(pr.get("dns_port") == listen_port, p + "peers' port is the responder's listen port")
    check({"name": "prober", "containerPort": listen_port, "protocol": "TCP"} in c["ports"], p + "responder containerPort")
    check(any(sp.get("port") == listen_port for sp in svc["spec"]["ports"]), p + "Service names the responder port")
    check(svc["spec"]["ports"][0]["name"] == "metrics", p + "the metrics port stays first (ServiceMonitor)")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    secret_vols = [v for v in vols.values() if "secret" in v]
    check(len(secret_vols) == 1 and secret_vols[0]["secret"].get("secretName") == "rdma-exporter-prober"
          and not secret_vols[0]["secret"].get("optional"), p + "mounts the user's Secret rdma-exporter-prober (required)")
    check(not any(k == "Secret" for (k, _) in objs), p + "ships no Secret (the user creates it)")
    mount = [m for m in c.get("volumeMounts", []) if secret_vols and m["name"] == secret_vols[0]["name"]]
    check(len(mount) == 1 and mount[0].get("readOnly") is True, p + "Secret mounted read-only")
    check(mount and pr.get("secret_file", "").startswith(mount[0]["mountPath"] + "/"), p + "secret_file inside the Secret mount")
    rails = pr.get("rails", [])
    check(len(rails) >= 1 and all("rail" in r and ("device" in r or "netdev" in r) for r in rails), p + "a rails example")
    check(pr.get("responder_max_qps", 1024) >= 8 * 256, p + "responder QPs for a few hundred peers on 8 rails")
    check(pr.get("peers_limit", 4096) >= 256, p + "peers_limit for a few hundred peers")
    limit = c.get("resources", {}).get("limits", {}).get("memory", "")
    check(limit.endswith("Mi") and int(limit[:-2]) >= 512, p + "memory limit sized for the mesh (>= 512Mi)")
    check(c["securityContext"]["capabilities"].get("add") == ["IPC_LOCK"], p + "IPC_LOCK (registered memory)")
    check(any(k.startswith("rdma/") for k in c["resources"]["limits"]), p + "RDMA device resource")
    # The real exporter loads it, with a stand-in for the Secret's file.
    with tempfile.TemporaryDirectory() as tmp:
        secret = os.path.join(tmp, "secret")
        open(secret, "w").write("test-secret\n")
        exporter_loads(cm["data"]["rdma_exporter.yml"].replace(pr.get("secret_file", "\0"), secret), "prober ConfigMap",
                       env=POD_ENV)


if prober_f:
    check_prober(load(prober_f))


def names_source(c, cfg):
    """Where the workload collector of this pod takes names from (the collector's `auto` rule:
    cri when a cri-socket is set, else kubernetes in a pod), and the CRI socket it would use."""
    wl = dict(cfg.get("collectors", {}).get("workload", {}))
    for a in c.get("args", []):
        for key in ("names", "cri-socket"):
            if a.startswith("--collector.workload.%s=" % key):
                wl[key.replace("-", "_")] = a.split("=", 1)[1]
    if not wl.get("enabled"):
        return "none", ""
    names = wl.get("names", "auto")
    if names == "auto":
        names = "cri" if wl.get("cri_socket") else "kubernetes"
    return names, wl.get("cri_socket", "")


def check_names_wiring(objs, variant):
    """Every variant mounts what its names source needs and nothing more: a CRI socket under a
    read-only mount of a runtime directory and no token; or the token and no runtime socket."""
    ds, pod, c, cm = check_common(objs, variant)
    p = variant + ": "
    names, sock = names_source(c, yaml.safe_load(cm["data"]["rdma_exporter.yml"]))
    runtime_dirs = {v["name"] for v in pod.get("volumes", [])
                    if v.get("hostPath", {}).get("path", "").rstrip("/") in RUNTIME_SOCKET_DIRS}
    runtime_ro = [m["mountPath"] for m in c.get("volumeMounts", [])
                  if m["name"] in runtime_dirs and m.get("readOnly") is True]
    token = token_volume(pod, c)[1]
    reader = any(k == "ClusterRole" and n.startswith("rdma-exporter-pod-reader") for k, n in objs)  # nameSuffix
    if names == "cri":
        check(any(sock.startswith(d.rstrip("/") + "/") for d in runtime_ro),
              p + "cri-socket %r lies under no read-only mount of the runtime's directory (mounted: %s)"
              % (sock, runtime_ro))
        check(not token, p + "names from the CRI socket, yet the pod-reader token is projected")
    else:
        check(not runtime_dirs, p + "names from %s, yet a container runtime socket is mounted (%s)"
              % (names, sorted(runtime_dirs)))
    if names == "kubernetes":
        check(bool(token) and reader, p + "names from the Kubernetes API need the projected token and the pod reader")
    elif names == "none":
        check(not token and not reader, p + "no names: no token, no pod reader")
    return cm


for f, variant in ((overlay_f, "rdma-devices"), (prober_f, "prober"), (cri_f, "rdma-devices-cri")):
    if f:
        check_names_wiring(load(f), variant)
if gpu_f:
    exporter_loads(check_names_wiring(load(gpu_f), "gpu-8x8")["data"]["rdma_exporter.yml"], "gpu-8x8 ConfigMap",
                   env=POD_ENV)

for e in errors:
    print("FAIL " + e)
print("manifest checks: %d problems" % len(errors))
sys.exit(1 if errors else 0)

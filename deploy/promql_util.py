"""PromQL helpers for the deploy tests and deploy/generate.py: collect the expressions of Grafana
dashboards and Prometheus rule files, substitute Grafana variables, list the metric names an
expression uses, and read the metric tables of docs/metrics.md."""
import json
import re

# Grafana's built-in interval variables and what a check substitutes for them.
GRAFANA_BUILTINS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__range_s": "3600",
                    "__range_ms": "3600000", "__interval_ms": "60000"}
# Metrics that Prometheus itself makes (scrape meta-series).
PROMETHEUS_BUILTIN = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                      "scrape_series_added", "scrape_samples_post_metric_relabeling"}

# Markers in a docs/metrics.md row saying what the series needs that the demo and fixture trees
# lack (real hardware, ibsim, the Soft-RoCE VM, a network namespace, a probing peer), or when it
# appears (after a counter wrapped; with the first error): such a row may be missing from a scrape
# of those trees (tests/prometheus/check_metrics_doc.py, tests/deploy/test_dashboards_live.py).
NEEDS_MARKERS = ("hardware", "ibsim", "vm", "netns", "prober", "after a wrap", "on error",
                 "pci tree")  # pci tree: PCIe bridges and GPUs (tests/topology/pci_gen.py)

_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
    "offset", "atan2", "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
    "count_values", "bottomk", "topk", "quantile", "inf", "nan", "start", "end",
}


def substitute(expr, builtins=None, var_value="placeholder"):
    """Replaces Grafana variables: $__rate_interval etc. by durations, any other $var, ${var},
    ${var:fmt} or [[var]] by var_value (inside regex matchers '.*' keeps the query meaningful)."""
    b = dict(GRAFANA_BUILTINS, **(builtins or {}))

    def rep(m):
        name = m.group(1) or m.group(2) or m.group(3)
        return b.get(name, var_value)
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]", rep, expr)


def metrics_in(expr):
    """Metric names an expression selects (histogram _bucket/_sum/_count kept as written)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)   # strings
    e = re.sub(r"\{[^}]*\}", "", e)                                             # matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                                            # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+-?\w+", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in _KEYWORDS:
            continue
        if re.fullmatch(r"\d+\w*", word):
            continue
        names.add(word)
    return names


def recorded_exprs(path):
    """{record: expr} of the recording rules of a rules file."""
    import yaml
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    if doc.get("kind") == "PrometheusRule":
        doc = doc["spec"]
    return {r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"] if "record" in r}


def exported_metrics_in(expr, records):
    """metrics_in(expr) with each recorded series replaced by the metrics its rule reads (a panel
    or alert on a record needs what the record is computed from)."""
    out, todo, seen = set(), list(metrics_in(expr)), set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if m in records:
            todo.extend(metrics_in(records[m]))
        else:
            out.add(m)
    return out


def base_family(name, documented):
    """Maps a selected name to its documented family: histogram/summary suffixes."""
    if name in documented:
        return name
    for suf in ("_bucket", "_sum", "_count"):
        if name.endswith(suf) and name[: -len(suf)] in documented:
            return name[: -len(suf)]
    return None


def parse_metrics_doc(path):
    """{name: {"type", "labels", "needs", "section"}} from the metric tables of docs/metrics.md:
    rows `| rdma_name | type | label, label | ... |` (the name may be in backticks); "needs" is the
    first of NEEDS_MARKERS the row carries as *marker*, or None."""
    out, section = {}, ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                section = line[3:].strip()
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            name = cells[0].strip("`")
            if len(cells) < 6 or not re.fullmatch(r"rdma_[a-z0-9_]+", name):
                continue
            out[name] = {"type": cells[1], "labels": [l.strip() for l in cells[2].split(",") if l.strip()],
                         "needs": next((m for m in NEEDS_MARKERS if "*%s*" % m in line), None),
                         "section": section}
    return out


def documented_metrics(path):
    doc = parse_metrics_doc(path)
    names = set(doc)
    for n, d in doc.items():
        if d["type"] in ("histogram", "summary"):
            names |= {n + "_bucket", n + "_sum", n + "_count"}
    return names | PROMETHEUS_BUILTIN


def dashboard_exprs(path):
    """[(where, expr)] for every target and query variable of a dashboard (rows' nested panels too)."""
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    out = []

    def walk(panels, prefix=""):
        for p in panels or []:
            where = "%spanel %s '%s'" % (prefix, p.get("id"), p.get("title", ""))
            for t in p.get("targets", []) or []:
                if t.get("expr"):
                    out.append(("%s target %s" % (where, t.get("refId")), t["expr"]))
            walk(p.get("panels"), where + " > ")
    walk(d.get("panels"))
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", q or "")
        if m:
            q = m.group(1)
        m = re.fullmatch(r"\s*query_result\((.*)\)\s*", q or "")
        if m:
            q = m.group(1)
        if q and not re.fullmatch(r"\s*(label_values\(\s*\w+\s*\)|metrics\(.*\)|label_names\(.*\))\s*", q):
            out.append(("variable $%s" % v["name"], q))
    return out


def rule_exprs(path):
    import yaml
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    if doc.get("kind") == "PrometheusRule":
        doc = doc["spec"]
    return [("group %s rule %s" % (g["name"], r.get("alert") or r.get("record")), r["expr"])
            for g in doc["groups"] for r in g["rules"]]

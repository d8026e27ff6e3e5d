#!/usr/bin/env python3
"""Offline checks of the shipped dashboards and alert rules (ctest label unit):

- every PromQL expression (dashboard targets, query variables, rules) parses: Grafana variables
  are substituted, each expression becomes a recording rule, `promtool check rules` parses them;
- every metric an expression uses is documented in docs/metrics.md (or is Prometheus' own `up`);
- dashboards: valid against grafana-dashboard.schema.json (Grafana's dashboard kind and
  Prometheus query types from @grafana/schema, closed: an unknown key, a wrong type or enum value,
  a missing required key or a grid position off the 24 columns is an error; panel plugin options
  are not covered, see the schema's $comment), and the schema rejects a broken dashboard;
  current schemaVersion, a Prometheus datasource variable used by every panel, job/node (and
  device/port) variables, unique panel ids;
- rules: summary, description, severity and a runbook_url whose anchor is a heading of
  docs/runbooks.md; the PrometheusRule carries exactly the rules file's groups;
(That the files equal deploy/generate.py's output is deploy.deploy.generated's check.)

usage: check_monitoring.py REPO_ROOT
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "deploy"))
import promql_util  # noqa: E402

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", ".."))
errors = []
documented = promql_util.documented_metrics(os.path.join(root, "docs", "metrics.md"))
dashboards = sorted(glob.glob(os.path.join(root, "dashboards", "*.json")))
rules_file = os.path.join(root, "deploy", "prometheus", "rdma-exporter.rules.yml")
prule_file = os.path.join(root, "deploy", "kubernetes", "base", "prometheusrule.yaml")
if len(dashboards) < 5:
    errors.append("expected 5 dashboards, found %d" % len(dashboards))

with open(os.path.join(HERE, "grafana-dashboard.schema.json"), encoding="utf-8") as f:
    schema = jsonschema.Draft7Validator(json.load(f))


def schema_errors(d):
    return ["/".join(str(x) for x in e.absolute_path) + ": " + e.message[:200] for e in schema.iter_errors(d)]


exprs = []  # (file, where, expr)
for path in dashboards:
    rel = os.path.relpath(path, root)
    d = json.load(open(path, encoding="utf-8"))
    errors += ["%s: Grafana schema: %s" % (rel, e) for e in schema_errors(d)]
    if d.get("schemaVersion", 0) < 39:
        errors.append("%s: schemaVersion %s < 39" % (rel, d.get("schemaVersion")))
    if not d.get("uid") or d.get("id") is not None:
        errors.append("%s: needs a fixed uid and id null (for provisioning)" % rel)
    tv = {v["name"]: v for v in d["templating"]["list"]}
    if tv.get("datasource", {}).get("type") != "datasource" or tv["datasource"].get("query") != "prometheus":
        errors.append("%s: no Prometheus datasource variable" % rel)
    for need in ("job", "node"):
        if need not in tv:
            errors.append("%s: no $%s variable" % (rel, need))
    if "prober" not in rel:
        for need in ("device", "port"):
            if need not in tv:
                errors.append("%s: no $%s variable" % (rel, need))
    ids = []
    for p in d["panels"]:
        ids.append(p["id"])
        if not {"h", "w", "x", "y"} <= set(p.get("gridPos", {})):
            errors.append("%s: panel %s has no gridPos" % (rel, p["id"]))
        if p["type"] != "row":
            if p.get("datasource", {}).get("uid") != "${datasource}":
                errors.append("%s: panel %s does not use ${datasource}" % (rel, p["id"]))
            if not p.get("targets"):
                errors.append("%s: panel %s has no targets" % (rel, p["id"]))
    if len(ids) != len(set(ids)):
        errors.append("%s: duplicate panel ids" % rel)
    if not any(p["type"] != "row" for p in d["panels"]):
        errors.append("%s: no panels" % rel)
    exprs += [(rel, w, e) for w, e in promql_util.dashboard_exprs(path)]

# The schema check can fail: each of these breaks a dashboard the way a typo in generate.py would.
if dashboards:
    good = json.load(open(dashboards[0], encoding="utf-8"))
    panel = next(i for i, p in enumerate(good["panels"]) if p["type"] != "row")
    breakages = {
        "unknown panel key": lambda d: d["panels"][panel].update(fieldconfig={}),
        "gridPos past column 24": lambda d: d["panels"][panel]["gridPos"].update(w=25),
        "unknown variable type": lambda d: d["templating"]["list"][0].update(type="dropdown"),
        "target without expr": lambda d: d["panels"][panel]["targets"][0].pop("expr"),
        "threshold mode typo": lambda d: d["panels"][panel]["fieldConfig"]["defaults"].update(
            thresholds={"mode": "absolut", "steps": []}),
        "no schemaVersion": lambda d: d.pop("schemaVersion"),
    }
    for what, breaks in breakages.items():
        d = json.loads(json.dumps(good))
        breaks(d)
        if not schema_errors(d):
            errors.append("the Grafana schema accepts a dashboard with %s" % what)

runbooks = open(os.path.join(root, "docs", "runbooks.md"), encoding="utf-8").read()
anchors = {re.sub(r"[^a-z0-9_ -]", "", h.strip().lower()).replace(" ", "-")
           for h in re.findall(r"^#+ (.+)$", runbooks, re.M)}
rules = yaml.safe_load(open(rules_file, encoding="utf-8"))
prule = yaml.safe_load(open(prule_file, encoding="utf-8"))
if prule.get("spec") != rules:
    errors.append("prometheusrule.yaml spec differs from rdma-exporter.rules.yml")
n_alerts = 0
for g in rules["groups"]:
    for r in g["rules"]:
        if "alert" not in r:
            continue
        n_alerts += 1
        a = r.get("annotations", {})
        for k in ("summary", "description", "runbook_url"):
            if not a.get(k):
                errors.append("alert %s: no %s" % (r["alert"], k))
        if r.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
            errors.append("alert %s: severity must be critical, warning or info" % r["alert"])
        frag = a.get("runbook_url", "").rpartition("#")[2]
        if frag not in anchors:
            errors.append("alert %s: runbook anchor #%s is not a heading of docs/runbooks.md" % (r["alert"], frag))
exprs += [(os.path.relpath(rules_file, root), w, e) for w, e in promql_util.rule_exprs(rules_file)]

# Every metric documented (a recorded series is documented by its rule, whose inputs are checked).
documented = documented | set(promql_util.recorded_exprs(rules_file))
used = set()
for f, w, e in exprs:
    for m in promql_util.metrics_in(promql_util.substitute(e)):
        used.add(m)
        if m not in documented:
            errors.append("%s: %s uses %s, which docs/metrics.md does not list" % (f, w, m))

# Every expression parses (promtool).
with tempfile.TemporaryDirectory() as tmp:
    rf = os.path.join(tmp, "exprs.yml")
    # Regex matchers get '.*' (what "All" sends); anything else a harmless word.
    doc = {"groups": [{"name": "check", "rules": [
        {"record": "check:expr_%d" % i, "expr": promql_util.substitute(e, var_value=".*")}
        for i, (_, _, e) in enumerate(exprs)]}]}
    json.dump(doc, open(rf, "w"))
    p = subprocess.run(["promtool", "check", "rules", rf], capture_output=True, text=True)
    if p.returncode != 0:
        out = p.stdout + p.stderr
        for i, (f, w, e) in enumerate(exprs):   # name the culprits one by one
            one = {"groups": [{"name": "c", "rules": [{"record": "c:x", "expr": promql_util.substitute(e, var_value=".*")}]}]}
            json.dump(one, open(rf, "w"))
            q = subprocess.run(["promtool", "check", "rules", rf], capture_output=True, text=True)
            if q.returncode != 0:
                errors.append("%s: %s does not parse: %s\n    %s" % (f, w, e, (q.stdout + q.stderr).strip()[-300:]))
        if not any("does not parse" in x for x in errors):
            errors.append("promtool check rules failed: " + out[-500:])

for e in errors:
    print("FAIL " + e)
print("%d expressions (%d dashboards, %d alerts), %d metrics used: %d problems"
      % (len(exprs), len(dashboards), n_alerts, len(used), len(errors)))
sys.exit(1 if errors else 0)

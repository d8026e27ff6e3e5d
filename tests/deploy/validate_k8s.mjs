// Offline validation of rendered Kubernetes manifests (no cluster):
//  1. kubernetes-models (+ @kubernetes-models/prometheus-operator for ServiceMonitor and
//     PrometheusRule): JSON-schema validation, i.e. types, required fields and enums;
//  2. kubernetes-types / the models' .d.ts + tsc --strict: unknown fields (excess properties),
//     which the schemas allow.
// usage: NODE_PATH=<node_modules> node validate_k8s.mjs rendered.yaml [more.yaml ...]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

const nodeModules = process.env.NODE_PATH;
if (!nodeModules) throw new Error("set NODE_PATH to the npm-tools.sh node_modules");
const require = createRequire(path.join(nodeModules, "x.js"));
const YAML = require("yaml");

const modelModule = (apiVersion) => {
  if (apiVersion === "monitoring.coreos.com/v1")
    return "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
  return "kubernetes-models/" + apiVersion;
};
const typeImport = (apiVersion, kind) => {
  if (apiVersion === "monitoring.coreos.com/v1")
    return [`@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}`, `I${kind}`];
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["core", apiVersion];
  // kubernetes-types names a group's folder by its first label (rbac.authorization.k8s.io -> rbac).
  return [`kubernetes-types/${group.split(".")[0]}/${version}`, kind];
};

let failures = 0;
let count = 0;
const tsLines = [];
let tsIndex = 0;
for (const file of process.argv.slice(2)) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
  for (const obj of docs) {
    count++;
    const id = `${file}: ${obj.kind}/${obj.metadata?.name}`;
    try {
      const mod = await import(path.join(nodeModules, modelModule(obj.apiVersion), "index.js"));
      const Model = mod[obj.kind];
      if (!Model) throw new Error(`no model for ${obj.apiVersion} ${obj.kind}`);
      new Model(obj).validate();
      console.log(`ok schema  ${id}`);
    } catch (e) {
      failures++;
      console.log(`FAIL schema ${id}: ${e.message}`);
    }
    const [from, type] = typeImport(obj.apiVersion, obj.kind);
    tsLines.push(`import type { ${type} as T${tsIndex} } from ${JSON.stringify(from)};`);
    tsLines.push(`// ${id}\nexport const o${tsIndex}: T${tsIndex} = ${JSON.stringify(obj, null, 1)};`);
    tsIndex++;
  }
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "k8s-tsc-"));
try {
  fs.writeFileSync(path.join(dir, "objects.ts"), tsLines.join("\n") + "\n");
  fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: "nodenext", moduleResolution: "nodenext",
                       target: "es2022", skipLibCheck: true, typeRoots: [], types: [],
                       baseUrl: ".", paths: { "*": [path.join(nodeModules, "*")] } },
    files: ["objects.ts"] }));
  try {
    execFileSync(process.execPath, [path.join(nodeModules, "typescript", "bin", "tsc"), "-p", dir],
                 { encoding: "utf8", stdio: "pipe" });
    console.log(`ok types   ${tsIndex} objects (tsc --strict, no unknown fields)`);
  } catch (e) {
    failures++;
    console.log("FAIL types:\n" + (e.stdout || "") + (e.stderr || ""));
  }
} finally {
  if (!process.env.KEEP_TSC) fs.rmSync(dir, { recursive: true, force: true });
}
console.log(`${count} objects, ${failures} failed`);
process.exit(failures ? 1 : 0);

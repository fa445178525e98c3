// Validates rendered Kubernetes manifests offline against the Kubernetes API's OpenAPI
// schemas (the npm package kubernetes-models: precompiled validators for every built-in
// kind), and refuses fields the schemas do not know (a misspelt field that the API server
// would drop, e.g. `readinesProbe`).
//
//   node validate.js NODE_MODULES_DIR FILE.yaml...
//
// Prints one line per object and one per error; exits 1 if any object is invalid.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [modules, ...files] = process.argv.slice(2);
if (!modules || files.length === 0) {
  console.error("usage: node validate.js NODE_MODULES_DIR FILE.yaml...");
  process.exit(2);
}
const load = createRequire(path.join(path.resolve(modules), "_"));
const yaml = load("js-yaml");

// kubernetes-models/<group>/<version>/<Kind>; the core group is kubernetes-models/v1/<Kind>.
function modelFor(obj) {
  const api = String(obj.apiVersion || "");
  const kind = String(obj.kind || "");
  if (!/^[a-z0-9.]*\/?v[0-9a-z]+$/.test(api) || !/^[A-Z][A-Za-z]+$/.test(kind)) return null;
  try {
    return load(`kubernetes-models/${api}/${kind}`)[kind];
  } catch (e) {
    return null;
  }
}

function errorsOf(Model, obj) {
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    return (e.errors || [{ instancePath: "", message: e.message }]).map(
      (x) => `${x.instancePath || "/"}: ${x.message}`);
  }
}

// A JSON pointer segment (RFC 6901), as ajv writes instancePath.
const seg = (k) => String(k).replace(/~/g, "~0").replace(/\//g, "~1");

// Every field path in obj ("/spec/template/..."), with its parent and key.
function* fields(value, pointer) {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) yield* fields(value[i], `${pointer}/${i}`);
  } else if (value !== null && typeof value === "object") {
    for (const k of Object.keys(value)) {
      yield { parent: value, key: k, pointer: `${pointer}/${seg(k)}` };
      yield* fields(value[k], `${pointer}/${seg(k)}`);
    }
  }
}

// A field the schema knows rejects a value no type accepts ([[]]: not a string, number,
// boolean or object, and an array whose element is none either); an unknown field takes it.
function unknownFields(Model, obj) {
  const unknown = [];
  for (const f of fields(obj, "")) {
    if (unknown.some((u) => f.pointer.startsWith(`${u.split(": ")[0]}/`))) continue;
    const saved = f.parent[f.key];
    f.parent[f.key] = [[]];
    const errs = errorsOf(Model, obj);
    f.parent[f.key] = saved;
    const hit = errs.some((e) => e.startsWith(`${f.pointer}:`) || e.startsWith(`${f.pointer}/`));
    if (!hit) unknown.push(`${f.pointer}: unknown field (not in the ${obj.kind} schema)`);
  }
  return unknown;
}

let bad = 0;
let count = 0;
for (const file of files) {
  const docs = yaml.loadAll(fs.readFileSync(file, "utf8")).filter((d) => d != null);
  for (const obj of docs) {
    count++;
    const name = `${path.basename(file)}: ${obj.apiVersion}/${obj.kind} ${obj.metadata && obj.metadata.name}`;
    const Model = modelFor(obj);
    if (!Model) {
      console.log(`FAIL ${name}: no schema for apiVersion ${obj.apiVersion} kind ${obj.kind}`);
      bad++;
      continue;
    }
    const errs = errorsOf(Model, obj);
    const unknown = errs.length === 0 ? unknownFields(Model, JSON.parse(JSON.stringify(obj))) : [];
    if (errs.length + unknown.length === 0) {
      console.log(`ok   ${name}`);
    } else {
      bad++;
      console.log(`FAIL ${name}`);
      for (const e of [...errs, ...unknown]) console.log(`       ${e}`);
    }
  }
}
console.log(`${count} object(s), ${bad} invalid`);
process.exit(bad === 0 && count > 0 ? 0 : 1);

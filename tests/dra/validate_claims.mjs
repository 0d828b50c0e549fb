// Judges DRA objects as the API server and kube-scheduler would: every object (the
// webhook's patched claims and templates, `gpuest claim`'s output, the manifests of
// deploy/kubernetes) against the resource.k8s.io/v1 (and core v1) schema of the
// kubernetes-models package, generated from the API's OpenAPI, with unknown fields
// refused as the API server's strict field validation (kubectl's default) refuses them;
// and every CEL selector of a firstAvailable subrequest evaluated (@bufbuild/cel)
// against ResourceSlice devices of every GPU model of the catalog, as the NVIDIA DRA
// driver publishes them (NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go:
// type, productName, architecture, profile; capacity memory): each must select exactly
// the devices of the model it names.
//
//   node validate_claims.mjs --modules NODE_MODULES --profiles models/gpu_profiles.json
//     --classes dra_device_classes.json --min-objects N FILE_OR_DIR...
// Exit 0 when all hold; 1 naming each failure.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const value = args[i + 1];
  args.splice(i, 2);
  return value;
};
const modules = opt("--modules");
const profilesPath = opt("--profiles");
const classesPath = opt("--classes");
const minObjects = Number(opt("--min-objects") ?? "1");
if (!modules || !profilesPath || !classesPath || args.length === 0) {
  console.error("usage: validate_claims.mjs --modules DIR --profiles FILE --classes FILE [--min-objects N] PATH...");
  process.exit(2);
}
if (!fs.existsSync(path.join(modules, "kubernetes-models"))) {
  console.error(`no kubernetes-models under ${modules}: run deploy/install-deps.sh (it installs tests/dra/package.json there)`);
  process.exit(1);
}
const load = (rel) => import(pathToFileURL(path.join(modules, rel)).href);
const { run } = await load("@bufbuild/cel/dist/esm/index.js");
const YAML = (await load("yaml/dist/index.js")).default;

const failures = [];
const fail = (where, why) => failures.push(`${where}: ${why}`);

// --- The schema -----------------------------------------------------------------
const MODELS = {
  "resource.k8s.io/v1/ResourceClaim": "kubernetes-models/resource.k8s.io/v1/ResourceClaim",
  "resource.k8s.io/v1/ResourceClaimTemplate": "kubernetes-models/resource.k8s.io/v1/ResourceClaimTemplate",
  "resource.k8s.io/v1/DeviceClass": "kubernetes-models/resource.k8s.io/v1/DeviceClass",
  "v1/Pod": "kubernetes-models/v1/Pod",
};

// The fields of a generated declaration (X.d.ts): name -> type text, and where its
// imported types live.
const declarations = new Map();
function declaration(file) {
  if (declarations.has(file)) return declarations.get(file);
  const text = fs.readFileSync(file, "utf8");
  const imports = new Map();
  for (const m of text.matchAll(/import \{ ([^}]+) \} from "([^"]+)";/g)) {
    for (const name of m[1].split(",").map((s) => s.trim())) {
      let target = m[2];
      if (target.startsWith(".")) target = path.join(path.dirname(file), target);
      else target = path.join(modules, target);
      imports.set(name, target.replace(/\.js$/, "") + ".d.ts");
    }
  }
  const body = text.match(/export interface I\w+(?: extends [\w, ]+)? \{([\s\S]*?)\n\}/);
  const fields = new Map();
  if (body) {
    // Comments out, then one field per line: "name"?: Type;
    const lines = body[1]
      .replace(/\/\*\*[\s\S]*?\*\//g, "")
      .replace(/\{\s*\[key: string\]: ([^;{}]+);\s*\}/g, "{ [key: string]: $1 }")
      .split("\n");
    for (const line of lines) {
      const f = line.match(/^\s*"([^"]+)"\??: (.+);\s*$/);
      if (f) fields.set(f[1], f[2]);
    }
  }
  const d = { fields, imports, opaque: /RawExtension|JSONSchemaProps/.test(file) };
  declarations.set(file, d);
  return d;
}

// Unknown fields anywhere in value, as kube-apiserver's strict validation finds them.
function strict(file, value, where) {
  const d = declaration(file);
  if (d.opaque || value === null || typeof value !== "object" || Array.isArray(value)) return;
  for (const [key, child] of Object.entries(value)) {
    if (!d.fields.has(key)) {
      fail(where, `unknown field "${key}"`);
      continue;
    }
    strictType(d, d.fields.get(key), child, `${where}.${key}`);
  }
}
function strictType(d, type, value, where) {
  type = type.trim();
  let m;
  if ((m = type.match(/^Array<(.+)>$/))) {
    if (Array.isArray(value)) value.forEach((v, i) => strictType(d, m[1], v, `${where}[${i}]`));
  } else if ((m = type.match(/^\{\s*\[key: string\]: (.+?);?\s*\}$/))) {
    if (value && typeof value === "object") {
      for (const [k, v] of Object.entries(value)) strictType(d, m[1], v, `${where}[${k}]`);
    }
  } else if (d.imports.has(type)) {
    strict(d.imports.get(type), value, where);
  }
}

async function validate(object, where) {
  const key = `${object.apiVersion}/${object.kind}`;
  const rel = MODELS[key];
  if (!rel) {
    fail(where, `no schema here for ${key}`);
    return false;
  }
  const before = failures.length;
  const module = await load(rel + ".js");
  const Model = module[object.kind];
  try {
    new Model(object).validate();
  } catch (e) {
    fail(where, `not a valid ${key}: ${String(e.message).slice(0, 600)}`);
  }
  strict(path.join(modules, rel + ".d.ts"), object, where);
  return failures.length === before;
}

// --- The devices ----------------------------------------------------------------
const profiles = JSON.parse(fs.readFileSync(profilesPath, "utf8")).gpus;
const table = JSON.parse(fs.readFileSync(classesPath, "utf8")).device_classes;
const dnsLabel = (id) => id.toLowerCase().replace(/[^a-z0-9]/g, "-").replace(/^-+|-+$/g, "").slice(0, 63);
// One device per name nvidia-smi prints for the model (its variants), as the driver
// publishes it.
const devices = [];
for (const p of profiles) {
  const mig = / MIG /.test(p.name);
  const names = mig ? [p.name] : [p.name, ...p.aliases.filter((a) => a.includes(" "))];
  for (const name of names) {
    const attributes = new Map([
      ["type", mig ? "mig" : "gpu"],
      ["productName", mig ? name.slice(0, name.lastIndexOf(" MIG ")) : name],
      ["architecture", p.architecture],
    ]);
    if (mig) attributes.set("profile", name.slice(name.lastIndexOf(" MIG ") + 5));
    devices.push({
      model: p.id,
      memoryBytes: BigInt(p.memory_mib) * 1048576n,
      cel: new Map([
        ["driver", "gpu.nvidia.com"],
        ["attributes", new Map([["gpu.nvidia.com", attributes]])],
        ["capacity", new Map([["gpu.nvidia.com", new Map([["memory", BigInt(p.memory_mib) * 1048576n]])]])],
      ]),
    });
  }
}
// The classes' own selectors: the driver's (its chart's DeviceClasses select type gpu
// and type mig) and deploy/kubernetes/dra-deviceclass.yaml's, read from the manifests.
const classSelectors = new Map([
  ["gpu.nvidia.com", [`device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`]],
  ["mig.nvidia.com", [`device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig"`]],
]);

function selects(expression, device) {
  const result = run(expression, { device: device.cel });
  if (typeof result === "boolean") return result;
  return false; // An evaluation error: the scheduler does not pick the device either.
}

const QUANTITY = /^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/;
const UNITS = { Ki: 1n << 10n, Mi: 1n << 20n, Gi: 1n << 30n, Ti: 1n << 40n, k: 1000n, M: 1000000n, G: 1000000000n, T: 1000000000000n };
const bytesOf = (q) => {
  const m = String(q).match(QUANTITY);
  return m ? BigInt(m[1]) * (m[2] ? UNITS[m[2]] : 1n) : null;
};

let subrequests = 0;
function checkSelectors(object, where) {
  const claimSpec = object.kind === "ResourceClaimTemplate" ? object.spec?.spec : object.spec;
  const meta = object.kind === "ResourceClaimTemplate" ? object.spec?.metadata : object.metadata;
  const requirements = JSON.parse(meta?.annotations?.["gpuest.io/requirement-bytes"] ?? "{}");
  // What the API server's validation adds to the schema (k8s.io/api resource/v1:
  // FirstAvailableDeviceRequestMaxSize 8, DeviceSelectorsMaxSize 32; names are DNS
  // labels, unique in their list; a config names "<request>" or "<request>/<subrequest>").
  const refs = new Set();
  for (const [i, request] of (claimSpec?.devices?.requests ?? []).entries()) {
    refs.add(request.name);
    const list = request.firstAvailable ?? [];
    if (list.length > 8) fail(`${where}.devices.requests[${i}]`, `${list.length} alternatives, over the API's 8`);
    const names = new Set();
    for (const sub of list) {
      if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(sub.name)) fail(`${where}.devices.requests[${i}]`, `subrequest name "${sub.name}" is not a DNS label`);
      if (names.has(sub.name)) fail(`${where}.devices.requests[${i}]`, `subrequest "${sub.name}" twice`);
      names.add(sub.name);
      refs.add(`${request.name}/${sub.name}`);
      if ((sub.selectors ?? []).length > 32) fail(`${where}.devices.requests[${i}]`, "over 32 selectors");
    }
  }
  for (const [k, config] of (claimSpec?.devices?.config ?? []).entries()) {
    for (const ref of config.requests ?? []) {
      if (!refs.has(ref)) fail(`${where}.devices.config[${k}]`, `names "${ref}", no request of the claim`);
    }
  }
  for (const [i, request] of (claimSpec?.devices?.requests ?? []).entries()) {
    for (const [j, sub] of (request.firstAvailable ?? []).entries()) {
      const at = `${where}.devices.requests[${i}].firstAvailable[${j}] (${sub.name})`;
      const cls = table.find((c) => c.device_class === sub.deviceClassName);
      const intended = profiles.find((p) => dnsLabel(p.id) === sub.name);
      if (!cls || !intended) continue; // Not a subrequest gpuest wrote.
      subrequests++;
      const pool = devices.filter((d) => (classSelectors.get(cls.device_class) ?? []).every((e) => selects(e, d)));
      if (pool.length === 0) fail(at, `the class ${cls.device_class} selects no device at all`);
      const picked = pool.filter((d) => (sub.selectors ?? []).every((s) => selects(s.cel.expression, d)));
      const models = [...new Set(picked.map((d) => d.model))];
      if (models.length !== 1 || models[0] !== intended.id) {
        fail(at, `selects ${JSON.stringify(models)}, not exactly ["${intended.id}"]`);
      }
      const all = pool.filter((d) => d.model === intended.id).length;
      if (picked.length !== all) fail(at, `selects ${picked.length} of the ${all} variants of ${intended.id}`);
      const figure = requirements[`${request.name}/${sub.name}`];
      if (figure === undefined) fail(at, "no gpuest.io/requirement-bytes entry");
      if (cls.shared) {
        const asked = bytesOf(sub.capacity?.requests?.[cls.memory_capacity]);
        if (asked === null) fail(at, `no capacity.requests.${cls.memory_capacity}`);
        else {
          if (figure !== undefined && asked < BigInt(figure)) fail(at, `asks ${asked} bytes, under gpuest's ${figure}`);
          if (asked > picked[0]?.memoryBytes) fail(at, `asks ${asked} bytes, over the device's memory`);
        }
      } else if (sub.capacity) {
        fail(at, "a whole device's subrequest carries capacity requests");
      }
    }
  }
}

// --- The objects ----------------------------------------------------------------
const objects = [];
for (const target of args) {
  const files = fs.statSync(target).isDirectory()
    ? fs.readdirSync(target).filter((f) => /\.(json|ya?ml)$/.test(f)).sort().map((f) => path.join(target, f))
    : [target];
  for (const file of files) {
    const text = fs.readFileSync(file, "utf8");
    const docs = /\.ya?ml$/.test(file) ? YAML.parseAllDocuments(text).map((d) => d.toJSON()) : [JSON.parse(text)];
    docs.filter((d) => d).forEach((d, i) => objects.push([`${path.basename(file)}#${i}`, d]));
  }
}
for (const [where, object] of objects) {
  if (object.kind === "DeviceClass") {
    classSelectors.set(object.metadata.name, (object.spec.selectors ?? []).map((s) => s.cel.expression));
  }
}
for (const [where, object] of objects) {
  await validate(object, where);
  if (object.kind === "ResourceClaim" || object.kind === "ResourceClaimTemplate") checkSelectors(object, where);
}
if (objects.length < minObjects) fail("objects", `${objects.length}, fewer than the ${minObjects} expected`);
if (subrequests === 0) fail("objects", "no firstAvailable subrequest of gpuest's to judge");

// The judge itself: a misspelled field, a wrong type and a selector of another model
// must each be refused, or the checks above prove nothing.
const sample = objects.find(([, o]) => o.kind === "ResourceClaimTemplate" && o.spec?.spec?.devices?.requests?.[0]?.firstAvailable);
if (sample) {
  const held = failures.length;
  const misspelled = structuredClone(sample[1]);
  const request = misspelled.spec.spec.devices.requests[0];
  request.firstAvaliable = request.firstAvailable;
  delete request.firstAvailable;
  const wrongType = structuredClone(sample[1]);
  wrongType.spec.spec.devices.requests[0].firstAvailable[0].count = "one";
  const typo = await validate(misspelled, "self-test misspelled");
  const typed = await validate(wrongType, "self-test wrong type");
  const crossed = structuredClone(sample[1]);
  const subs = crossed.spec.spec.devices.requests[0].firstAvailable;
  if (subs.length > 1) {
    subs[0].selectors = subs[1].selectors;
    checkSelectors(crossed, "self-test crossed selector");
  }
  const caught = failures.length - held;
  failures.splice(held);
  if (typo) fail("self-test", "a misspelled field (firstAvaliable) passed the schema");
  if (typed) fail("self-test", "count: \"one\" passed the schema");
  if (subs.length > 1 && caught < 3) fail("self-test", "another model's selector passed");
} else {
  fail("self-test", "no sized ResourceClaimTemplate among the objects to test the judge with");
}

for (const f of failures) console.error(`FAIL ${f}`);
console.log(`${objects.length} objects, ${subrequests} subrequests judged against ${devices.length} devices: ${failures.length === 0 ? "all hold" : failures.length + " failures"}`);
process.exit(failures.length === 0 ? 0 : 1);

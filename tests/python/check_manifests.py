"""Renders and validates the Kubernetes manifests in deploy/.

Usage: check_manifests.py REPO_ROOT [--kubernetes-version 1.37] [--npm-dir DIR]

Renders deploy/base and every deploy/overlays/*/ with `kubectl kustomize` (the kustomize that
`kubectl apply -k` uses), reads deploy/examples/*.yaml as they are, and validates every document:

- Built-in kinds: against the Kubernetes OpenAPI schemas that kubernetes-validate (PyPI) ships for
  --kubernetes-version, in its strict flavour (a field the API does not know is an error, as
  `kubectl apply`'s default server-side field validation makes it). Every error is reported, not
  only the first.
- Our own kinds (group example.shadow-reconciler.io): with jsonschema against the CRD's
  openAPIV3Schema read from deploy/crds/*.yaml, turned into JSON Schema the way the API server
  reads it (`nullable`, `x-kubernetes-int-or-string`, and unknown fields rejected unless
  `x-kubernetes-preserve-unknown-fields`), plus `metadata` against ObjectMeta and the CRD's scope.
- ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1): kubernetes-validate has no CRD
  schemas, and no PyPI package ships prometheus-operator's. The npm package
  @kubernetes-models/prometheus-operator does: its validators are generated from
  prometheus-operator's CRD schemas (types, enums, patterns, required fields), run here with
  node. Those validators let unknown fields through, so the checker also walks each document
  along the package's TypeScript declarations (.d.ts, generated from the same schemas) and
  rejects any field they do not declare; Kubernetes types inside them (ObjectMeta,
  LabelSelector, ...) are checked strictly against kubernetes-validate's definitions. The
  package is installed with npm into --npm-dir (default ~/.cache/shadow-reconciler/npm) on first
  use. node and npm are required: a missing one is an error, not a skip.

Then it checks invariants of our own:

- every container (and native sidecar) has resource requests and limits for cpu and memory,
  liveness and readiness probes, and a restricted securityContext (runAsNonRoot,
  readOnlyRootFilesystem, allowPrivilegeEscalation false, capabilities drop ALL, a seccomp
  profile);
- a shadow-reconciler container gets POD_NAMESPACE and POD_NAME from the downward API, a writable
  /tmp and a volume at its --parquet-dir, its ConfigMap and PersistentVolumeClaim volumes exist in
  the same render, and its pod has terminationGracePeriodSeconds >= 30 (controllers 10 s plus
  --parquet-grace 10 s plus room);
- every Role and ClusterRole rule names explicit apiGroups, resources and verbs, none of them `*`,
  and every binding's roleRef exists in the render;
- least privilege: a grant (role, resource, verb) without `resourceNames` must be in
  UNNAMED_GRANTS, the table deploy/README.md justifies row by row; `delete` is always by name;
- listen addresses: a shadow-reconciler container with an HTTP probe gives `--listen` on all
  interfaces at the probe's port (the binary defaults to loopback), and its OTLP receivers
  (`--otlp-grpc`, `--otlp-http`) stay on loopback;
- every NetworkPolicy egress rule names its destinations (`to`, valid CIDRs, none of prefix 0),
  except DNS (port 53 only), and the API server's rule (443/6443) holds exactly the CIDR of
  deploy/base/apiserver-egress.yaml;
- namespaced objects carry a namespace and cluster-scoped ones do not;
- in a render with workloads: every Service selects pods of the render and its named targetPorts
  exist on them, every ServiceMonitor endpoint finds a Service port of that name, and every
  NetworkPolicy selects pods of the render.

The Helm chart (deploy/helm/shadow-reconciler), rendered with `helm template` (--helm, Helm v4):

- `helm lint --strict` passes;
- with its default values it renders exactly the objects of deploy/overlays/standalone, and with
  controller.enabled=false those of deploy/base, less the Namespace (a chart leaves it to
  `--create-namespace`): same identities, same content, labels compared without the ones that
  name the tool or the release (app.kubernetes.io/managed-by, app.kubernetes.io/instance,
  app.kubernetes.io/version, helm.sh/chart). A difference is reported field by field;
- a render with every value changed (another namespace, a digest, an object store, labels, ...)
  passes all the checks above, and values its schema refuses fail `helm template`.

Prints one line per render and a summary with the number of documents validated in each; exits
non-zero listing every failure as `render: source file: Kind namespace/name: field: message`.
"""

import argparse
import copy
import fcntl
import glob
import importlib.resources
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import referencing
import yaml
from kubernetes_validate.version import __version__ as KUBERNETES_VALIDATE_VERSION

DEFAULT_KUBERNETES_VERSION = "1.37"
NPM_PACKAGE = "@kubernetes-models/prometheus-operator"
NPM_VERSION = "6.0.0"
MONITORING_GROUP = "monitoring.coreos.com"
ORIGIN = "config.kubernetes.io/origin"
DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"

# Built-in kinds without a namespace (the ones a deploy/ tree could plausibly hold).
CLUSTER_SCOPED = {
    "APIService", "CSIDriver", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
    "FlowSchema", "IngressClass", "MutatingWebhookConfiguration", "Namespace", "PersistentVolume",
    "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass", "StorageClass",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration", "VolumeAttachment",
}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"}


def fail(message):
    raise SystemExit(f"check_manifests: {message}")


# ---------------------------------------------------------------------------------------------
# Documents and failures


class Doc:
    def __init__(self, data, render, origin):
        self.data = data
        self.render = render
        self.origin = origin

    @property
    def kind(self):
        return self.data.get("kind", "?")

    @property
    def namespace(self):
        return (self.data.get("metadata") or {}).get("namespace")

    @property
    def name(self):
        return (self.data.get("metadata") or {}).get("name", "?")

    def label(self):
        ns = self.namespace
        return f"{self.kind} {ns}/{self.name}" if ns else f"{self.kind} {self.name}"


class Failures:
    def __init__(self):
        self.items = []

    def add(self, doc, field, message):
        field = field or "(document)"
        self.items.append(f"{doc.render}: {doc.origin}: {doc.label()}: {field}: {message}")


def json_path(parts):
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# ---------------------------------------------------------------------------------------------
# Rendering


def kubectl():
    path = shutil.which("kubectl")
    if not path:
        fail("kubectl is not installed; it renders the overlays (`kubectl kustomize`, kustomize "
             "v5). Install kubectl and run again.")
    return path


def run_kustomize(directory):
    result = subprocess.run([kubectl(), "kustomize", directory], capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"`kubectl kustomize {directory}` failed:\n{result.stderr.strip()}")
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def render(root, relative):
    """Renders deploy/<relative> as users get it, and again from a copy whose kustomization asks
    for origin annotations, to name each document's source file. The two must agree."""
    plain = run_kustomize(os.path.join(root, relative))
    with tempfile.TemporaryDirectory() as tmp:
        copy_root = os.path.join(tmp, "repo")
        shutil.copytree(os.path.join(root, "deploy"), os.path.join(copy_root, "deploy"))
        kustomization = os.path.join(copy_root, relative, "kustomization.yaml")
        with open(kustomization) as f:
            k = yaml.safe_load(f) or {}
        k["buildMetadata"] = sorted(set(k.get("buildMetadata") or []) | {"originAnnotations"})
        with open(kustomization, "w") as f:
            yaml.safe_dump(k, f)
        annotated = run_kustomize(os.path.join(copy_root, relative))
    docs = []
    for data in annotated:
        meta = data.setdefault("metadata", {})
        annotations = meta.get("annotations") or {}
        origin = yaml.safe_load(annotations.pop(ORIGIN, "") or "") or {}
        if not annotations:
            meta.pop("annotations", None)
        if "path" in origin:
            source = os.path.normpath(os.path.join(relative, origin["path"]))
        elif "configuredBy" in origin:
            by = origin["configuredBy"].get("kind", "generator")
            source = f"{by} in {os.path.join(relative, origin.get('configuredIn', 'kustomization.yaml'))}"
        else:
            source = os.path.join(relative, "kustomization.yaml")
        docs.append(Doc(data, relative, source))
    if [d.data for d in docs] != plain:
        fail(f"rendering {relative} with origin annotations changed the output; cannot name "
             "source files reliably")
    return docs


# The labels Helm's conventions add and kustomize's do not (or set otherwise): they name the tool
# or the release, not the object.
HELM_ONLY_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
                    "app.kubernetes.io/version", "helm.sh/chart")
HELM_RELEASE = "shadow-reconciler"


def run_helm(helm, args):
    result = subprocess.run([helm, *args], capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr.strip()


def render_helm(helm, chart, render_name, namespace, options):
    """`helm template` of the chart, one Doc per document, named after its `# Source:` file."""
    code, out, err = run_helm(helm, ["template", HELM_RELEASE, chart, "--namespace", namespace,
                                     *options])
    if code != 0:
        fail(f"`helm template {HELM_RELEASE} {chart} --namespace {namespace} "
             f"{' '.join(options)}` failed:\n{err}")
    docs = []
    for chunk in re.split(r"^---\s*$", out, flags=re.M):
        source = re.search(r"^# Source: (.+)$", chunk, flags=re.M)
        data = yaml.safe_load(chunk)
        if data:
            origin = source.group(1) if source else "(no # Source)"
            docs.append(Doc(data, render_name, os.path.join("deploy/helm", origin)))
    return docs


def differences(left, right, path=()):
    """The paths where two parsed documents differ, with both values."""
    if isinstance(left, dict) and isinstance(right, dict):
        found = []
        for key in sorted(set(left) | set(right), key=str):
            if key not in right:
                found.append((json_path([*path, key]), left[key], "(absent)"))
            elif key not in left:
                found.append((json_path([*path, key]), "(absent)", right[key]))
            else:
                found.extend(differences(left[key], right[key], (*path, key)))
        return found
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        found = []
        for i, (a, b) in enumerate(zip(left, right)):
            found.extend(differences(a, b, (*path, i)))
        return found
    return [] if left == right else [(json_path(path) or "(document)", left, right)]


def comparable(doc):
    data = copy.deepcopy(doc.data)
    labels = (data.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        for label in HELM_ONLY_LABELS:
            labels.pop(label, None)
    return data


def compare_renders(chart_docs, kustomize_docs, kustomize_target, failures):
    """The chart's render holds exactly the kustomize render's objects, less its Namespace."""
    def identity(doc):
        return (doc.data.get("apiVersion"), doc.kind, doc.namespace or "", doc.name)
    chart = {identity(d): d for d in chart_docs}
    wanted = {identity(d): d for d in kustomize_docs if d.kind != "Namespace"}
    for key in sorted(set(wanted) - set(chart), key=str):
        failures.add(wanted[key], "", f"rendered by kustomize ({kustomize_target}), not by the "
                                      f"chart ({chart_docs[0].render if chart_docs else 'empty'})")
    for key in sorted(set(chart) - set(wanted), key=str):
        failures.add(chart[key], "", f"rendered by the chart, not by kustomize ({kustomize_target})")
    for key in sorted(set(chart) & set(wanted), key=str):
        for field, ours, theirs in differences(comparable(chart[key]), comparable(wanted[key])):
            failures.add(chart[key], field, f"chart gives {json.dumps(ours)}, kustomize "
                                            f"({wanted[key].origin}) gives {json.dumps(theirs)}")


# Every value of the chart changed at once: the render must still pass every check.
HELM_OPTIONS = [
    "--include-crds",
    "--set", "image.repository=registry.example/mirror/shadow-reconciler",
    "--set", "image.digest=sha256:" + "ab" * 32,
    "--set", "clusterName=mgmt-eu-1",
    "--set", "logLevel=debug",
    "--set", "parquet.dir=s3://bucket/shadow",
    "--set", "parquet.spool=/var/lib/shadow-reconciler/data/spool",
    "--set-json", 'extraArgs=["--parquet-max-rows","50000"]',
    "--set-json", 'extraEnv=[{"name":"AWS_REGION","value":"eu-west-1"}]',
    "--set", "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/x",
    "--set", "otel.endpoint=http://otel-collector.observability:4317",
    "--set", "otel.protocol=grpc",
    "--set", "flag.mode=enforce",
    "--set", "flag.enforcedGroups=non-critical-syncs",
    "--set", "flag.rampPercent=12.5",
    "--set", "flag.allowObjectOverride=true",
    "--set", "persistence.size=50Gi",
    "--set", "persistence.storageClassName=fast-ssd",
    "--set", "terminationGracePeriodSeconds=90",
    "--set-json", 'nodeSelector={"kubernetes.io/os":"linux"}',
    "--set", "serviceMonitor.labels.release=kube-prometheus-stack",
    "--set", "serviceMonitor.interval=15s",
    "--set", "prometheusRule.labels.release=kube-prometheus-stack",
    "--set", "networkPolicy.prometheusNamespace=observability",
]

# Values the chart's schema refuses, each with a word the error must contain.
HELM_REFUSED = [
    (["--set", "flag.mode=enforced"], "/flag/mode"),
    (["--set", "flag.rampPercent=101"], "/flag/rampPercent"),
    (["--set", "flag.rampPercent=12.345"], "/flag/rampPercent"),
    (["--set", "image.digest=latest"], "/image/digest"),
    (["--set", "serviceMonitor.enable=false"], "enable"),
    (["--set", "parquet.dir="], "/parquet/dir"),
]


def check_chart(root, helm, builtin, crds, monitoring, failures, kustomized, counts):
    chart = os.path.join(root, "deploy", "helm", "shadow-reconciler")
    code, out, err = run_helm(helm, ["lint", "--strict", chart])
    if code != 0:
        failures.items.append(f"helm lint --strict deploy/helm/shadow-reconciler: {out}{err}")
    renders = [
        ("helm:standalone", "shadow-reconciler", ["--include-crds"], "deploy/overlays/standalone"),
        ("helm:embedded", "shadow-reconciler", ["--set", "controller.enabled=false"],
         "deploy/base"),
        ("helm:options", "ops", HELM_OPTIONS, None),
    ]
    for name, namespace, options, target in renders:
        docs = render_helm(helm, chart, name, namespace, options)
        validate_render(docs, builtin, copy.deepcopy(crds), monitoring, failures)
        if target is not None:
            compare_renders(docs, kustomized[target], target, failures)
        counts.append((name, len(docs)))
    for options, word in HELM_REFUSED:
        code, _, err = run_helm(helm, ["template", HELM_RELEASE, chart, *options])
        if code == 0:
            failures.items.append(f"helm template {' '.join(options)}: accepted; the chart's "
                                  "values.schema.json should refuse it")
        elif word not in err:
            failures.items.append(f"helm template {' '.join(options)}: refused, but the error "
                                  f"does not name {word!r}: {err}")


def read_examples(root, relative):
    docs = []
    for path in sorted(glob.glob(os.path.join(root, relative, "*.yaml"))):
        with open(path) as f:
            for data in yaml.safe_load_all(f):
                if data:
                    docs.append(Doc(data, relative, os.path.relpath(path, root)))
    return docs


# ---------------------------------------------------------------------------------------------
# Built-in kinds: kubernetes-validate's strict schemas


class BuiltinSchemas:
    def __init__(self, version):
        supported = kubernetes_validate.utils.all_versions()
        matching = [v for v in supported if v.rsplit(".", 1)[0] == version or v == version]
        if not matching:
            fail(f"kubernetes-validate {KUBERNETES_VALIDATE_VERSION} has no schemas for "
                 f"Kubernetes {version} (it has {', '.join(supported)})")
        self.version = matching[-1]
        self.directory = importlib.resources.files("kubernetes_validate").joinpath(
            "kubernetes-json-schema", f"v{self.version}-local-strict")
        definitions = json.loads(self.directory.joinpath("_definitions.json").read_text())
        self.definitions = definitions["$defs"]
        self.registry = referencing.Resource.from_contents(definitions) @ referencing.Registry()
        # TypeScript-style names (IoK8sApimachineryPkgApisMetaV1LabelSelector) to definitions.
        self.by_flat_name = {n.replace(".", "").replace("-", "").lower(): n
                             for n in self.definitions}

    def schema_for(self, data):
        api_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", str(data.get("apiVersion", "")))
        path = self.directory.joinpath(f"{str(data.get('kind', '')).lower()}-{api_version}.json")
        if not path.is_file():
            return None
        return json.loads(path.read_text())

    def validator(self, schema):
        return jsonschema.Draft202012Validator(schema, registry=self.registry)

    def definition_validator(self, name):
        return self.validator({"$ref": f"{DEFINITIONS_ID}#/$defs/{name}"})


def report(failures, doc, validator, instance, prefix=()):
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.path))):
        failures.add(doc, json_path(list(prefix) + list(error.absolute_path)), error.message)


# ---------------------------------------------------------------------------------------------
# Our own kinds: the CRDs' openAPIV3Schema


def structural_to_json_schema(node, root=False):
    """An openAPIV3Schema node as JSON Schema, with the API server's reading of it."""
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties"):
            out[key] = {k: structural_to_json_schema(v) for k, v in value.items()}
        elif key == "items":
            out[key] = structural_to_json_schema(value)
        elif key == "additionalProperties" and isinstance(value, dict):
            out[key] = structural_to_json_schema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [structural_to_json_schema(v) for v in value]
        elif key == "not":
            out[key] = structural_to_json_schema(value)
        elif key.startswith("x-kubernetes-") or key in ("nullable", "default", "example",
                                                        "externalDocs"):
            continue
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if (node.get("type") == "object" and not preserve and "additionalProperties" not in node
            and "properties" in node):
        out["additionalProperties"] = False
    if root:
        # apiVersion, kind and metadata are the API server's; metadata is checked separately.
        props = out.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props.setdefault("metadata", {"type": "object"})
    return out


class CrdSchemas:
    def __init__(self, root):
        self.kinds = {}  # (apiVersion, kind) -> (validator, scope)
        self.scopes = {}  # kind -> scope, for every group
        for path in sorted(glob.glob(os.path.join(root, "deploy", "crds", "*.yaml"))):
            with open(path) as f:
                for crd in yaml.safe_load_all(f):
                    if crd and crd.get("kind") == "CustomResourceDefinition":
                        self.add(crd)

    def add(self, crd):
        spec = crd["spec"]
        self.scopes[spec["names"]["kind"]] = spec["scope"]
        for version in spec.get("versions", []):
            schema = ((version.get("schema") or {}).get("openAPIV3Schema"))
            if not schema or not version.get("served", True):
                continue
            converted = structural_to_json_schema(schema, root=True)
            key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
            self.kinds[key] = (jsonschema.Draft202012Validator(converted), spec["scope"])

    def get(self, data):
        return self.kinds.get((data.get("apiVersion"), data.get("kind")))


# ---------------------------------------------------------------------------------------------
# ServiceMonitor and PrometheusRule: @kubernetes-models/prometheus-operator under node

NODE_SCRIPT = r"""
import { readFileSync } from "node:fs";
const docs = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const doc of docs) {
  const [group, version] = doc.apiVersion.split("/");
  let model;
  try {
    model = (await import(`%(package)s/${group}/${version}/${doc.kind}`))[doc.kind];
  } catch (e) {
    out.push([{ path: "", message: `%(package)s has no model for ${doc.apiVersion} ${doc.kind} (${e.message})` }]);
    continue;
  }
  try {
    new model(doc).validate();
    out.push([]);
  } catch (e) {
    const errors = e.errors || [{ instancePath: "", message: e.message }];
    out.push(errors.map((x) => ({ path: x.instancePath || "", message: x.message })));
  }
}
process.stdout.write(JSON.stringify(out));
"""


class MonitoringSchemas:
    def __init__(self, npm_dir, builtin):
        self.builtin = builtin
        self.npm_dir = npm_dir
        self.package_dir = os.path.join(npm_dir, "node_modules", *NPM_PACKAGE.split("/"))
        self.dts_cache = {}

    def ensure_installed(self):
        for tool in ("node", "npm"):
            if not shutil.which(tool):
                fail(f"{tool} is not installed; ServiceMonitor and PrometheusRule are validated "
                     f"with the npm package {NPM_PACKAGE}@{NPM_VERSION} under node. Install "
                     "Node.js and npm and run again.")
        os.makedirs(self.npm_dir, exist_ok=True)
        # Several checks run at once (the test harness runs tests in parallel): one installs
        # while the others wait for it, never two npm installs into the same directory.
        with open(os.path.join(self.npm_dir, ".install.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.install_locked()

    def install_locked(self):
        installed = os.path.join(self.package_dir, "package.json")
        if os.path.exists(installed):
            with open(installed) as f:
                if json.load(f).get("version") == NPM_VERSION and self.loads():
                    return
            # An install cut short (a killed run) leaves the package without its dependencies:
            # start over rather than trust it.
            shutil.rmtree(os.path.join(self.npm_dir, "node_modules"), ignore_errors=True)
        result = subprocess.run(
            ["npm", "install", "--prefix", self.npm_dir, "--no-audit", "--no-fund",
             "--no-save", "--loglevel=error", f"{NPM_PACKAGE}@{NPM_VERSION}"],
            capture_output=True, text=True)
        if result.returncode != 0 or not os.path.exists(installed) or not self.loads():
            fail(f"`npm install {NPM_PACKAGE}@{NPM_VERSION}` into {self.npm_dir} failed:\n"
                 f"{result.stderr.strip()}")

    def loads(self):
        """Whether node loads the two models the manifests use (the install is whole)."""
        probe = ("await import('%(p)s/monitoring.coreos.com/v1/ServiceMonitor');"
                 "await import('%(p)s/monitoring.coreos.com/v1/PrometheusRule');" % {"p": NPM_PACKAGE})
        result = subprocess.run(["node", "--input-type=module", "-e", probe],
                                capture_output=True, text=True, cwd=self.npm_dir)
        return result.returncode == 0

    def validate(self, docs, failures):
        if not docs:
            return
        self.ensure_installed()
        # A script of this run's own (node resolves the package next to it), so that parallel
        # checks never read a file another one is writing.
        with tempfile.NamedTemporaryFile("w", dir=self.npm_dir, prefix="validate-monitoring-",
                                         suffix=".mjs", delete=False) as f:
            f.write(NODE_SCRIPT % {"package": NPM_PACKAGE})
            script = f.name
        try:
            result = subprocess.run(["node", script], input=json.dumps([d.data for d in docs]),
                                    capture_output=True, text=True, cwd=self.npm_dir)
        finally:
            os.remove(script)
        if result.returncode != 0:
            fail(f"node could not run the {NPM_PACKAGE} validators:\n{result.stderr.strip()}")
        for doc, errors in zip(docs, json.loads(result.stdout)):
            for error in errors:
                field = ".".join(p for p in error["path"].split("/") if p)
                failures.add(doc, re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", field), error["message"])
            group, version = doc.data["apiVersion"].split("/")
            dts = os.path.join(self.package_dir, group, version, f"{doc.kind}.d.ts")
            if os.path.exists(dts):
                self.walk(doc, failures, doc.data, ("object", dts), [])

    # -- unknown fields, along the .d.ts declarations ------------------------------------------

    def declarations(self, dts):
        """The properties of the class a .d.ts declares (inherited ones included) and the
        imports that resolve their types; None for a type alias."""
        if dts in self.dts_cache:
            return self.dts_cache[dts]
        with open(dts) as f:
            text = f.read()
        imports = dict(re.findall(r'import \{ (\w+) \} from "([^"]+)";', text))
        body = re.search(r"export declare class \w+ extends Model<\w+> implements \w+ \{\n(.*?)\n\}",
                         text, re.S)
        props = None
        if body:
            props = {}
            current, depth, buffer = None, 0, ""
            for line in body.group(1).splitlines():
                if current is None:
                    m = re.match(r'    "([^"]+)"\??: (.*)$', line)
                    if not m:
                        continue
                    current, buffer = m.group(1), m.group(2)
                else:
                    buffer += " " + line.strip()
                depth = buffer.count("{") + buffer.count("<") - buffer.count("}") - buffer.count(">")
                if depth <= 0 and buffer.endswith(";"):
                    props[current] = buffer[:-1].strip()
                    current = None
        self.dts_cache[dts] = (props, imports, os.path.dirname(dts))
        return self.dts_cache[dts]

    def resolve(self, type_name, imports, directory):
        type_name = type_name.strip()
        m = re.fullmatch(r"Array<(.*)>", type_name)
        if m:
            return ("array", self.resolve(m.group(1), imports, directory))
        m = re.fullmatch(r"\{ *\[key: string\]: (.*?);? *\}", type_name)
        if m:
            return ("map", self.resolve(m.group(1), imports, directory))
        source = imports.get(type_name)
        if source is None:
            return ("leaf",)
        if source.startswith("./"):
            return ("object", os.path.join(directory, source[2:].replace(".js", ".d.ts")))
        flat = type_name[1:].lower()  # IIoK8s... -> iok8s...
        definition = self.builtin.by_flat_name.get(flat)
        return ("k8s", definition) if definition else ("leaf",)

    def walk(self, doc, failures, value, kind, path):
        if kind[0] == "array" and isinstance(value, list):
            for i, item in enumerate(value):
                self.walk(doc, failures, item, kind[1], path + [i])
        elif kind[0] == "map" and isinstance(value, dict):
            for key, item in value.items():
                self.walk(doc, failures, item, kind[1], path + [key])
        elif kind[0] == "k8s" and value is not None:
            report(failures, doc, self.builtin.definition_validator(kind[1]), value, path)
        elif kind[0] == "object" and isinstance(value, dict) and os.path.exists(kind[1]):
            props, imports, directory = self.declarations(kind[1])
            if props is None:
                return
            for key, item in value.items():
                if key not in props:
                    failures.add(doc, json_path(path + [key]),
                                 f"unknown field (not in {NPM_PACKAGE}'s "
                                 f"{os.path.basename(kind[1])[:-5]})")
                    continue
                self.walk(doc, failures, item, self.resolve(props[key], imports, directory),
                          path + [key])


# ---------------------------------------------------------------------------------------------
# Invariants


def pod_spec(data):
    kind = data.get("kind")
    spec = data.get("spec") or {}
    if kind == "Pod":
        return spec, ["spec"]
    if kind == "CronJob":
        return ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template", {}).get(
            "spec") or {}, ["spec", "jobTemplate", "spec", "template", "spec"]
    if kind in WORKLOADS:
        return (spec.get("template") or {}).get("spec") or {}, ["spec", "template", "spec"]
    return None, None


def pod_labels(data):
    if data.get("kind") == "Pod":
        return (data.get("metadata") or {}).get("labels") or {}
    if data.get("kind") == "CronJob":
        template = ((data["spec"].get("jobTemplate") or {}).get("spec") or {}).get("template")
    else:
        template = (data.get("spec") or {}).get("template")
    return ((template or {}).get("metadata") or {}).get("labels") or {}


def containers(spec, prefix):
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or []):
            sidecar = field == "initContainers" and c.get("restartPolicy") == "Always"
            yield prefix + [field, i], c, field == "containers" or sidecar


def is_shadow_reconciler(container):
    return bool(re.search(r"(^|/)shadow-reconciler(:|@|$)", str(container.get("image", ""))))


def check_containers(doc, failures, by_identity):
    spec, prefix = pod_spec(doc.data)
    if spec is None:
        return
    pod_security = spec.get("securityContext") or {}
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for path, c, long_running in containers(spec, prefix):
        where = json_path(path)
        resources = c.get("resources") or {}
        for section in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                if not (resources.get(section) or {}).get(resource):
                    failures.add(doc, f"{where}.resources.{section}.{resource}", "missing")
        if long_running:
            for probe in ("livenessProbe", "readinessProbe"):
                if not c.get(probe):
                    failures.add(doc, f"{where}.{probe}", "missing")
        security = c.get("securityContext") or {}
        if not (security.get("runAsNonRoot") or (pod_security.get("runAsNonRoot")
                                                 and security.get("runAsNonRoot") is not False)):
            failures.add(doc, f"{where}.securityContext.runAsNonRoot",
                         "must be true (on the container or the pod)")
        if security.get("readOnlyRootFilesystem") is not True:
            failures.add(doc, f"{where}.securityContext.readOnlyRootFilesystem", "must be true")
        if security.get("allowPrivilegeEscalation") is not False:
            failures.add(doc, f"{where}.securityContext.allowPrivilegeEscalation",
                         "must be false")
        if "ALL" not in ((security.get("capabilities") or {}).get("drop") or []):
            failures.add(doc, f"{where}.securityContext.capabilities.drop", "must contain ALL")
        seccomp = (security.get("seccompProfile") or pod_security.get("seccompProfile") or {})
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            failures.add(doc, f"{where}.securityContext.seccompProfile.type",
                         "must be RuntimeDefault or Localhost (on the container or the pod)")
        if is_shadow_reconciler(c):
            check_shadow_reconciler(doc, failures, where, c, spec, prefix, volumes, by_identity)


def check_shadow_reconciler(doc, failures, where, c, spec, prefix, volumes, by_identity):
    env = {e.get("name"): e for e in c.get("env") or []}
    for name, field in (("POD_NAMESPACE", "metadata.namespace"), ("POD_NAME", "metadata.name")):
        got = (((env.get(name) or {}).get("valueFrom") or {}).get("fieldRef") or {})
        if got.get("fieldPath") != field:
            failures.add(doc, f"{where}.env", f"{name} must come from the downward API "
                                              f"(fieldRef {field})")
    mounts = {m.get("mountPath"): m for m in c.get("volumeMounts") or []}
    if "/tmp" not in mounts:
        failures.add(doc, f"{where}.volumeMounts", "no writable volume at /tmp (the root "
                                                   "filesystem is read-only)")
    args = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
    for i, arg in enumerate(args):
        # The local directories it writes: --parquet-dir unless it is an object store's URL
        # (s3://, gs://, az://), and the spool of an object store.
        for option in ("--parquet-dir", "--parquet-spool"):
            directory = None
            if arg == option and i + 1 < len(args):
                directory = args[i + 1]
            elif arg.startswith(option + "="):
                directory = arg.split("=", 1)[1]
            if not directory or "://" in directory:
                continue
            if not any(directory == p or directory.startswith(p.rstrip("/") + "/")
                       for p in mounts if p):
                failures.add(doc, f"{where}.volumeMounts", f"no volume at {option} {directory}")
    for path, mount in mounts.items():
        volume = volumes.get(mount.get("name"))
        if volume is None:
            failures.add(doc, f"{where}.volumeMounts", f"volume {mount.get('name')!r} at {path} "
                                                       "is not in the pod's volumes")
            continue
        for source, kind, key in (("configMap", "ConfigMap", "name"),
                                  ("persistentVolumeClaim", "PersistentVolumeClaim", "claimName")):
            if source in volume:
                name = volume[source].get(key)
                if (kind, doc.namespace, name) not in by_identity:
                    failures.add(doc, json_path(prefix + ["volumes"]),
                                 f"{kind} {doc.namespace}/{name} (volume {volume.get('name')!r}) "
                                 "is not in the render")
    check_listen(doc, failures, where, c, args)
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace < 30:
        failures.add(doc, json_path(prefix + ["terminationGracePeriodSeconds"]),
                     f"{grace} s leaves no time for the Parquet flush (controllers 10 s + "
                     "--parquet-grace 10 s); use at least 30")


# What a role may grant without `resourceNames`, by role: deploy/README.md's RBAC section says
# why each cannot be limited by name. Anything else must be.
UNNAMED_GRANTS = {
    "shadow-reconciler-hostedcluster": {
        ("hostedclusters", "get"), ("hostedclusters", "list"), ("hostedclusters", "watch"),
        ("hostedclusters/status", "update"), ("hostedclusters/status", "patch"),
        ("hostedcontrolplanes", "get"), ("hostedcontrolplanes", "create"),
        ("hostedcontrolplanes", "patch"),
        ("secrets", "get"), ("secrets", "create"), ("secrets", "patch"),
        ("configmaps", "get"), ("configmaps", "create"), ("configmaps", "patch"),
        ("configmaps", "list"),
        ("namespaces", "create"), ("namespaces", "patch"),
        ("clusterroles", "create"), ("clusterroles", "patch"),
        ("clusterrolebindings", "create"), ("clusterrolebindings", "patch"),
        ("services", "get"), ("services", "list"), ("services", "watch"),
        ("endpoints", "get"), ("endpoints", "list"), ("endpoints", "watch"),
        ("pods", "get"), ("pods", "list"), ("pods", "watch"),
        ("volumeattachments", "get"), ("volumeattachments", "list"),
    },
    "shadow-reconciler-addon": {
        ("clustermanagementaddons", "get"), ("clustermanagementaddons", "list"),
        ("clustermanagementaddons", "watch"), ("clustermanagementaddons/status", "patch"),
    },
    # Events get generated names; create cannot be limited by name (the leader-election Lease,
    # once).
    "shadow-reconciler-flag": {("events", "create"), ("events", "patch"), ("leases", "create")},
    # The driver drives whatever rollouts people create in its namespace; create cannot be
    # limited by name (its Lease, once); Events get generated names.
    "shadow-reconciler-rollout": {
        ("shadowrollouts", "get"), ("shadowrollouts", "list"), ("shadowrollouts", "watch"),
        ("shadowrollouts", "patch"),
        ("shadowrollouts/status", "get"), ("shadowrollouts/status", "patch"),
        ("leases", "create"),
        ("events", "create"), ("events", "patch"),
    },
}


def check_rbac(doc, failures, by_identity):
    kind = doc.kind
    if kind in ("Role", "ClusterRole"):
        allowed = UNNAMED_GRANTS.get(doc.name, set())
        for i, rule in enumerate(doc.data.get("rules") or []):
            if not rule.get("resourceNames"):
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        if verb == "delete" or (resource, verb) not in allowed:
                            failures.add(doc, f"rules[{i}]",
                                         f"{verb} on {resource} for every name: limit it with "
                                         "resourceNames, or justify it in deploy/README.md and "
                                         "UNNAMED_GRANTS")
            for field in ("apiGroups", "resources", "verbs"):
                values = rule.get(field)
                if not values:
                    failures.add(doc, f"rules[{i}].{field}", "must list explicit values")
                elif any("*" in str(v) for v in values):
                    failures.add(doc, f"rules[{i}].{field}", f"{values}: no `*`")
            if rule.get("nonResourceURLs"):
                failures.add(doc, f"rules[{i}].nonResourceURLs", "not expected")
    if kind in ("RoleBinding", "ClusterRoleBinding"):
        ref = doc.data.get("roleRef") or {}
        namespace = doc.namespace if ref.get("kind") == "Role" else None
        if (ref.get("kind"), namespace, ref.get("name")) not in by_identity:
            failures.add(doc, "roleRef", f"{ref.get('kind')} {ref.get('name')} is not in the render")
        if not doc.data.get("subjects"):
            failures.add(doc, "subjects", "binds nobody")


def flag_values(args, flag):
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            yield args[i + 1]
        elif arg.startswith(flag + "="):
            yield arg.split("=", 1)[1]


def split_host_port(address):
    host, _, port = address.rpartition(":")
    return host.strip("[]"), port


def check_listen(doc, failures, where, c, args):
    for flag in ("--otlp-grpc", "--otlp-http"):
        for address in flag_values(args, flag):
            host, _ = split_host_port(address)
            if host not in ("127.0.0.1", "::1", "localhost"):
                failures.add(doc, f"{where}.args", f"{flag} {address}: OTLP is unauthenticated; "
                                                   "keep it on loopback (the controller is in "
                                                   "the same pod)")
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    probed = set()
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        port = ((c.get(probe) or {}).get("httpGet") or {}).get("port")
        if port is not None:
            probed.add(ports.get(port, port))
    listen = list(flag_values(args, "--listen"))
    for port in probed:
        if not any(split_host_port(a) in (("0.0.0.0", str(port)), ("::", str(port)))
                   for a in listen):
            failures.add(doc, f"{where}.args", f"the probes ask port {port}, but `--listen` is "
                                               f"{listen or 'not given (loopback by default)'}: "
                                               f"give --listen 0.0.0.0:{port}")


# The API server's CIDR as deploy/base/apiserver-egress.yaml sets it (read in main).
APISERVER_CIDR = None


def check_network_policy(doc, failures):
    for i, rule in enumerate(doc.data.get("spec", {}).get("egress") or []):
        ports = {p.get("port") for p in rule.get("ports") or []}
        if ports and ports <= {53}:
            continue
        peers = rule.get("to") or []
        if not peers:
            failures.add(doc, f"spec.egress[{i}].to", f"ports {sorted(map(str, ports)) or 'all'} "
                                                      "to any destination: name them")
        for j, peer in enumerate(peers):
            cidr = (peer.get("ipBlock") or {}).get("cidr")
            if cidr is None:
                continue
            where = f"spec.egress[{i}].to[{j}].ipBlock.cidr"
            try:
                network = ipaddress.ip_network(str(cidr), strict=False)
            except ValueError:
                failures.add(doc, where, f"{cidr!r} is not a CIDR")
                continue
            if network.prefixlen == 0:
                failures.add(doc, where, f"{cidr} is any destination")
            if (ports & {443, 6443} and APISERVER_CIDR is not None
                    and str(cidr) != APISERVER_CIDR):
                failures.add(doc, where, f"{cidr} is not the API server's CIDR of "
                                         f"deploy/base/apiserver-egress.yaml ({APISERVER_CIDR}): "
                                         "the replacement in deploy/base/kustomization.yaml "
                                         "points at another rule")


def check_scope(doc, failures, crds):
    scope = crds.scopes.get(doc.kind)
    cluster = doc.kind in CLUSTER_SCOPED or scope == "Cluster"
    if cluster and doc.namespace:
        failures.add(doc, "metadata.namespace", "set on a cluster-scoped kind")
    if not cluster and not doc.namespace:
        failures.add(doc, "metadata.namespace", "missing: `kubectl apply` would put it in the "
                                                "current context's namespace")


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_wiring(docs, failures):
    workloads = [d for d in docs if d.kind in WORKLOADS]
    if not workloads:
        return
    for doc in docs:
        spec = doc.data.get("spec") or {}
        if doc.kind == "Service" and spec.get("selector"):
            pods = [w for w in workloads if w.namespace == doc.namespace
                    and selects(spec["selector"], pod_labels(w.data))]
            if not pods:
                failures.add(doc, "spec.selector", f"{spec['selector']} selects no pod of the render")
                continue
            names = {p.get("name") for w in pods for _, c, _ in containers(*pod_spec(w.data))
                     for p in c.get("ports") or []}
            for i, port in enumerate(spec.get("ports") or []):
                target = port.get("targetPort")
                if isinstance(target, str) and target not in names:
                    failures.add(doc, f"spec.ports[{i}].targetPort",
                                 f"no container port named {target!r} in the selected pods")
        elif doc.kind == "ServiceMonitor":
            ns_selector = spec.get("namespaceSelector") or {}
            namespaces = ns_selector.get("matchNames") or [doc.namespace]
            services = [s for s in docs if s.kind == "Service"
                        and (ns_selector.get("any") or s.namespace in namespaces)
                        and all(((s.data.get("metadata") or {}).get("labels") or {}).get(k) == v
                                for k, v in ((spec.get("selector") or {}).get("matchLabels")
                                             or {}).items())]
            if not services:
                failures.add(doc, "spec.selector", "selects no Service of the render")
            for i, endpoint in enumerate(spec.get("endpoints") or []):
                port = endpoint.get("port")
                if port and not any(p.get("name") == port for s in services
                                    for p in (s.data.get("spec") or {}).get("ports") or []):
                    failures.add(doc, f"spec.endpoints[{i}].port",
                                 f"no selected Service has a port named {port!r}")
        elif doc.kind == "NetworkPolicy":
            selector = (spec.get("podSelector") or {}).get("matchLabels") or {}
            if selector and not any(w.namespace == doc.namespace
                                    and selects(selector, pod_labels(w.data)) for w in workloads):
                failures.add(doc, "spec.podSelector", f"{selector} selects no pod of the render")


# ---------------------------------------------------------------------------------------------


def validate_render(docs, builtin, crds, monitoring, failures):
    for doc in docs:
        if doc.kind == "CustomResourceDefinition":
            crds.add(doc.data)  # a render may bring CRDs of its own
    by_identity = {(d.kind, d.namespace, d.name) for d in docs}
    monitoring_docs = []
    for doc in docs:
        data = doc.data
        if not isinstance(data.get("apiVersion"), str) or not data.get("kind"):
            failures.add(doc, "apiVersion/kind", "missing")
            continue
        schema = builtin.schema_for(data)
        crd = crds.get(data)
        if schema is not None:
            report(failures, doc, builtin.validator(schema), data)
        elif crd is not None:
            report(failures, doc, crd[0], data)
            report(failures, doc,
                   builtin.definition_validator("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
                   data.get("metadata") or {}, ["metadata"])
        elif data["apiVersion"].split("/")[0] == MONITORING_GROUP:
            monitoring_docs.append(doc)
        else:
            failures.add(doc, "apiVersion", f"no schema for {data['apiVersion']} {doc.kind}: "
                                            "neither built in, nor in deploy/crds, nor "
                                            f"{MONITORING_GROUP}")
        check_scope(doc, failures, crds)
        check_containers(doc, failures, by_identity)
        check_rbac(doc, failures, by_identity)
        if doc.kind == "NetworkPolicy":
            check_network_policy(doc, failures)
    monitoring.validate(monitoring_docs, failures)
    check_wiring(docs, failures)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="the repository root (holding deploy/)")
    parser.add_argument("--kubernetes-version", default=DEFAULT_KUBERNETES_VERSION)
    parser.add_argument("--helm", default=os.environ.get("SHADOW_RECONCILER_HELM"),
                        help="the helm binary (Helm v4) that renders deploy/helm "
                             "(default: $SHADOW_RECONCILER_HELM)")
    parser.add_argument("--npm-dir", default=os.environ.get(
        "SHADOW_RECONCILER_NPM_DIR",
        os.path.join(os.path.expanduser("~"), ".cache", "shadow-reconciler", "npm")))
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    if not os.path.isdir(os.path.join(root, "deploy", "base")):
        fail(f"{root} has no deploy/base")

    builtin = BuiltinSchemas(args.kubernetes_version)
    global APISERVER_CIDR
    egress = os.path.join(root, "deploy", "base", "apiserver-egress.yaml")
    if os.path.exists(egress):
        with open(egress, encoding="utf-8") as f:
            APISERVER_CIDR = str((yaml.safe_load(f).get("data") or {}).get("cidr"))
    crds = CrdSchemas(root)
    monitoring = MonitoringSchemas(os.path.abspath(args.npm_dir), builtin)
    targets = ["deploy/base"] + sorted(
        os.path.relpath(os.path.dirname(p), root)
        for p in glob.glob(os.path.join(root, "deploy", "overlays", "*", "kustomization.yaml")))
    failures = Failures()
    counts = []
    kustomized = {}
    for target in targets:
        docs = render(root, target)
        validate_render(docs, builtin, crds, monitoring, failures)
        counts.append((target, len(docs)))
        kustomized[target] = docs
    if os.path.isdir(os.path.join(root, "deploy", "helm")):
        if not args.helm:
            fail("deploy/helm holds a chart and no helm was given: pass --helm PATH or set "
                 "SHADOW_RECONCILER_HELM (scripts/helm.sh builds Helm and prints its path)")
        check_chart(root, args.helm, builtin, crds, monitoring, failures, kustomized, counts)
    if os.path.isdir(os.path.join(root, "deploy", "examples")):
        docs = read_examples(root, "deploy/examples")
        validate_render(docs, builtin, copy.deepcopy(crds), monitoring, failures)
        counts.append(("deploy/examples", len(docs)))

    for target, n in counts:
        print(f"{target}: {n} documents")
    if failures.items:
        print(f"check_manifests: {len(failures.items)} failures:", file=sys.stderr)
        for item in failures.items:
            print(f"  {item}", file=sys.stderr)
        sys.exit(1)
    total = sum(n for _, n in counts)
    print(f"check_manifests: {total} documents valid ("
          + ", ".join(f"{t.removeprefix('deploy/')} {n}" for t, n in counts)
          + f"); built-in kinds against Kubernetes {builtin.version} "
            f"(kubernetes-validate {KUBERNETES_VALIDATE_VERSION}, strict), CRD kinds against "
            f"deploy/crds, monitoring.coreos.com against {NPM_PACKAGE}@{NPM_VERSION}")


if __name__ == "__main__":
    main()

/**
 * Locates the pinned kube-apiserver, etcd, kubectl, kube-controller-manager, kube-proxy and
 * CoreDNS binaries built by `scripts/control-plane/build.sh`, and builds them when they are missing.
 *
 * Resolution order (the envtest convention first):
 *   1. `KUBEBUILDER_ASSETS`, when it names a directory holding the binaries (both
 *      kube-apiserver and etcd; kubectl, kube-controller-manager and kube-proxy each on its own;
 *      never CoreDNS, which envtest does not ship);
 *   2. the per-machine cache `${FLEET_MIRROR_CACHE:-~/.cache/fleet-mirror}/control-plane/`:
 *      `k8s-<v>_etcd-<v>/` for kube-apiserver and etcd, `kubectl-<v>/`,
 *      `kube-controller-manager-<v>/`, `kube-proxy-<v>/` and `coredns-<v>+hosts/` for the others.
 *
 * Also helm (`build.sh helm`, `helm-<v>/`), which the chart's tests render and lint with,
 * and KWOK (`build.sh kwok`, `kwok-<v>/` and its Stages in `kwok-stages-<v>/`), the fake
 * kubelet of sandbox/kwok.ts; like CoreDNS they are never taken from `KUBEBUILDER_ASSETS`
 * or PATH.
 *
 * Also the CRD manifests of the pinned `sigs.k8s.io/mcs-api` module (not a binary, but
 * fetched and cached the same way: `build.sh mcs-crds`, `mcs-api-<v>/`), those of the
 * Prometheus Operator (`build.sh monitoring-crds`, `monitoring-crds-<v>/`), helm
 * (`build.sh helm`) and Prometheus's `promtool` (`build.sh promtool`, `promtool-<v>/`),
 * the judge of the monitoring tests.
 */
import { execFile } from "node:child_process";
import { accessSync, constants, existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface ControlPlaneBinaries {
  readonly dir: string;
  readonly kubeApiserver: string;
  readonly etcd: string;
}

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** `sandbox/` sits one level and `dist/sandbox/` two levels below the root that holds `scripts/`. */
function scriptsDir(): string {
  for (const candidate of [join(repoRoot, "scripts"), join(repoRoot, "..", "scripts")]) {
    if (existsSync(join(candidate, "control-plane", "build.sh"))) return candidate;
  }
  throw new Error(`scripts/control-plane/build.sh not found above ${repoRoot}`);
}

function cacheDir(): string {
  return join(process.env["FLEET_MIRROR_CACHE"] ?? join(homedir(), ".cache", "fleet-mirror"), "control-plane");
}

function readPins(): {
  kubernetes: string;
  etcd: string;
  coredns: string;
  mcsApi: string;
  helm: string;
  prometheusOperator: string;
  prometheus: string;
  kwok: string;
} {
  const text = readFileSync(join(scriptsDir(), "control-plane", "versions.env"), "utf8");
  const get = (key: string): string => {
    const match = new RegExp(`^${key}=(\\S+)$`, "m").exec(text);
    if (!match?.[1]) throw new Error(`versions.env has no ${key}`);
    return match[1];
  };
  return {
    kubernetes: get("KUBERNETES_VERSION"),
    etcd: get("ETCD_VERSION"),
    coredns: get("COREDNS_VERSION"),
    mcsApi: get("MCS_API_VERSION"),
    prometheus: get("PROMETHEUS_VERSION"),
    helm: get("HELM_VERSION"),
    prometheusOperator: get("PROMETHEUS_OPERATOR_VERSION"),
    kwok: get("KWOK_VERSION"),
  };
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function inDir(dir: string): ControlPlaneBinaries | undefined {
  const kubeApiserver = join(dir, "kube-apiserver");
  const etcd = join(dir, "etcd");
  return isExecutable(kubeApiserver) && isExecutable(etcd) ? { dir, kubeApiserver, etcd } : undefined;
}

/** The binaries if they are already present; never builds. */
export function findControlPlaneBinaries(): ControlPlaneBinaries | undefined {
  const assets = process.env["KUBEBUILDER_ASSETS"];
  if (assets) {
    const found = inDir(assets);
    if (found) return found;
  }
  const pins = readPins();
  const dir = join(cacheDir(), `k8s-${pins.kubernetes}_etcd-${pins.etcd}`);
  return existsSync(join(dir, ".complete")) ? inDir(dir) : undefined;
}

/** The tools built one per cache directory: the build.sh argument, and that directory's name. */
type SingleTool = "kubectl" | "kube-controller-manager" | "kube-proxy" | "coredns" | "helm" | "promtool" | "kwok";

/** The pin each tool's cache directory is named after. */
function toolVersion(tool: SingleTool): string {
  const pins = readPins();
  if (tool === "coredns") return pins.coredns;
  if (tool === "helm") return pins.helm;
  if (tool === "promtool") return pins.prometheus;
  if (tool === "kwok") return pins.kwok;
  return pins.kubernetes;
}

function toolCacheDir(tool: SingleTool): string {
  // CoreDNS's directory names its plugin set too: one cached before `hosts` joined it lacks it.
  return join(cacheDir(), `${tool}-${toolVersion(tool)}${tool === "coredns" ? "+hosts" : ""}`);
}

/** `tool` from `KUBEBUILDER_ASSETS` (only what envtest ships) or from its complete cache directory; never builds. */
function findTool(tool: SingleTool): string | undefined {
  const assets = process.env["KUBEBUILDER_ASSETS"];
  const envtest = tool === "kubectl" || tool === "kube-controller-manager" || tool === "kube-proxy";
  if (envtest && assets && isExecutable(join(assets, tool))) return join(assets, tool);
  const dir = toolCacheDir(tool);
  const binary = join(dir, tool);
  return existsSync(join(dir, ".complete")) && isExecutable(binary) ? binary : undefined;
}

/**
 * The path of a kubectl at the pinned Kubernetes version if one is already present
 * (`KUBEBUILDER_ASSETS/kubectl`, else the cache's `kubectl-<v>/kubectl`); never builds.
 * A kubectl found on PATH is never used: its version, and its built-in kustomize, are
 * not pinned.
 */
export function findKubectl(): string | undefined {
  return findTool("kubectl");
}

/** The pinned kube-controller-manager if already present; never builds. */
export function findControllerManager(): string | undefined {
  return findTool("kube-controller-manager");
}

/** The pinned kube-proxy if already present; never builds (and never taken from PATH). */
export function findKubeProxy(): string | undefined {
  return findTool("kube-proxy");
}

/** The pinned CoreDNS if already present; never builds (and never taken from PATH). */
export function findCoreDns(): string | undefined {
  return findTool("coredns");
}

/** Runs `build.sh ...args` (progress on the inherited stderr) and returns the directory it prints last. */
async function runBuild(args: readonly string[]): Promise<string> {
  const script = join(scriptsDir(), "control-plane", "build.sh");
  return new Promise<string>((resolveDir, reject) => {
    const child = execFile("bash", [script, ...args], { maxBuffer: 1 << 20 }, (error, stdout) => {
      if (error) reject(new Error(`control-plane build failed: ${error.message}`, { cause: error }));
      else resolveDir(stdout.trim().split("\n").at(-1) ?? "");
    });
    child.stderr?.pipe(process.stderr);
  });
}

/**
 * The binaries, building them first if needed. The build prints its progress on
 * stderr (inherited) because the first one takes minutes.
 */
export async function ensureControlPlaneBinaries(): Promise<ControlPlaneBinaries> {
  const found = findControlPlaneBinaries();
  if (found) return found;
  const dir = await runBuild([]);
  const built = inDir(dir);
  if (!built) throw new Error(`control-plane build printed ${dir}, which lacks kube-apiserver or etcd`);
  return built;
}

async function ensureTool(tool: SingleTool): Promise<string> {
  const found = findTool(tool);
  if (found) return found;
  const binary = join(await runBuild([tool]), tool);
  if (!isExecutable(binary)) throw new Error(`${tool} build printed a directory without ${tool}: ${binary}`);
  return binary;
}

/** The path of the pinned kubectl, building it first if needed (`build.sh kubectl`). */
export async function ensureKubectl(): Promise<string> {
  return ensureTool("kubectl");
}

/** The path of the pinned kube-controller-manager, building it first if needed. */
export async function ensureControllerManager(): Promise<string> {
  return ensureTool("kube-controller-manager");
}

/** The path of the pinned kube-proxy, building it first if needed (`build.sh kube-proxy`). */
export async function ensureKubeProxy(): Promise<string> {
  return ensureTool("kube-proxy");
}

/** The path of the pinned CoreDNS, building it first if needed. */
export async function ensureCoreDns(): Promise<string> {
  return ensureTool("coredns");
}

/**
 * The path of the pinned promtool (Prometheus's linter and rule tester), building it first
 * if needed (`build.sh promtool`; never taken from PATH, whose version is not pinned).
 */
export async function ensurePromtool(): Promise<string> {
  return ensureTool("promtool");
}

/** The path of the pinned helm, building it first if needed (`build.sh helm`). */
export async function ensureHelm(): Promise<string> {
  return ensureTool("helm");
}

/** The Stages KWOK runs (sandbox/kwok.ts), as build.sh copies them from the module's kustomize/stage. */
export const KWOK_STAGES = [
  "node/fast/node-initialize.yaml",
  "pod/fast/pod-ready.yaml",
  "pod/fast/pod-complete.yaml",
  "pod/fast/pod-delete.yaml",
] as const;

export interface KwokFiles {
  readonly binary: string;
  /** The paths of `KWOK_STAGES`. */
  readonly stages: readonly string[];
}

/** The pinned KWOK and its Stages, building them first if needed (`build.sh kwok`). */
export async function ensureKwok(): Promise<KwokFiles> {
  const binary = await ensureTool("kwok");
  const stages = await ensureManifests("kwok", `kwok-stages-${readPins().kwok}`, KWOK_STAGES);
  return { binary, stages };
}

/** The MCS API's CRD manifests (ServiceExport, ServiceImport) of the pinned module. */
export interface McsCrdManifests {
  readonly version: string;
  readonly serviceExports: string;
  readonly serviceImports: string;
}

/**
 * The paths of `files` in `cache/<dirName>/`, running `build.sh <mode>` (a module
 * download, nothing compiled) first if that directory is not complete.
 */
async function ensureManifests(mode: string, dirName: string, files: readonly string[]): Promise<readonly string[]> {
  const inDir = (dir: string): string[] | undefined => {
    const paths = files.map((file) => join(dir, file));
    return existsSync(join(dir, ".complete")) && paths.every((path) => existsSync(path)) ? paths : undefined;
  };
  const dir = join(cacheDir(), dirName);
  const found = inDir(dir) ?? inDir(await runBuild([mode]));
  if (!found) throw new Error(`build.sh ${mode} did not leave ${files.join(", ")} in ${dir}`);
  return found;
}

/**
 * The paths of the pinned `sigs.k8s.io/mcs-api` CRD manifests, copying them out of the
 * Go module cache into `mcs-api-<v>/` first if needed (`build.sh mcs-crds`).
 */
export async function ensureMcsCrds(): Promise<McsCrdManifests> {
  const version = readPins().mcsApi;
  const [serviceExports = "", serviceImports = ""] = await ensureManifests("mcs-crds", `mcs-api-${version}`, [
    "multicluster.x-k8s.io_serviceexports.yaml",
    "multicluster.x-k8s.io_serviceimports.yaml",
  ]);
  return { version, serviceExports, serviceImports };
}

/** The Prometheus Operator's CRD manifests that fleet-mirror's chart and alerts use. */
export interface MonitoringCrdManifests {
  readonly version: string;
  readonly serviceMonitors: string;
  readonly prometheusRules: string;
}

/**
 * The paths of the pinned Prometheus Operator's ServiceMonitor and PrometheusRule CRD
 * manifests, copied into `monitoring-crds-<v>/` first if needed (`build.sh monitoring-crds`).
 */
export async function ensureMonitoringCrds(): Promise<MonitoringCrdManifests> {
  const version = readPins().prometheusOperator;
  const [serviceMonitors = "", prometheusRules = ""] = await ensureManifests(
    "monitoring-crds",
    `monitoring-crds-${version}`,
    ["monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"],
  );
  return { version, serviceMonitors, prometheusRules };
}

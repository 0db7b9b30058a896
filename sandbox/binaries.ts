/**
 * Locates the pinned kube-apiserver, etcd and kubectl binaries built by
 * `scripts/control-plane/build.sh`, and builds them when they are missing.
 *
 * Resolution order (the envtest convention first):
 *   1. `KUBEBUILDER_ASSETS`, when it names a directory holding the binaries (both
 *      kube-apiserver and etcd; kubectl on its own);
 *   2. the per-machine cache `${FLEET_MIRROR_CACHE:-~/.cache/fleet-mirror}/control-plane/`:
 *      `k8s-<v>_etcd-<v>/` for kube-apiserver and etcd, `kubectl-<v>/` for kubectl.
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

function readPins(): { kubernetes: string; etcd: string } {
  const text = readFileSync(join(scriptsDir(), "control-plane", "versions.env"), "utf8");
  const get = (key: string): string => {
    const match = new RegExp(`^${key}=(\\S+)$`, "m").exec(text);
    if (!match?.[1]) throw new Error(`versions.env has no ${key}`);
    return match[1];
  };
  return { kubernetes: get("KUBERNETES_VERSION"), etcd: get("ETCD_VERSION") };
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

/**
 * The path of a kubectl at the pinned Kubernetes version if one is already present
 * (`KUBEBUILDER_ASSETS/kubectl`, else the cache's `kubectl-<v>/kubectl`); never builds.
 * A kubectl found on PATH is never used: its version, and its built-in kustomize, are
 * not pinned.
 */
export function findKubectl(): string | undefined {
  const assets = process.env["KUBEBUILDER_ASSETS"];
  if (assets && isExecutable(join(assets, "kubectl"))) return join(assets, "kubectl");
  const dir = join(cacheDir(), `kubectl-${readPins().kubernetes}`);
  const kubectl = join(dir, "kubectl");
  return existsSync(join(dir, ".complete")) && isExecutable(kubectl) ? kubectl : undefined;
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

/** The path of the pinned kubectl, building it first if needed (`build.sh kubectl`). */
export async function ensureKubectl(): Promise<string> {
  const found = findKubectl();
  if (found) return found;
  const kubectl = join(await runBuild(["kubectl"]), "kubectl");
  if (!isExecutable(kubectl)) throw new Error(`kubectl build printed a directory without kubectl: ${kubectl}`);
  return kubectl;
}

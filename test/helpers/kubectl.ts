/**
 * The pinned kubectl (and any other command-line tool) run against sandbox clusters, for
 * the tests that apply installation manifests: deploy/ (deploy.test.ts) and the Helm
 * chart (helm-chart.test.ts). Plain helpers over parsed JSON, never a client library's
 * typed models, so an object is compared as the tool printed it.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";

export interface ToolResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string> };
}

/**
 * The value at a dotted path (`spec.template.spec.containers.0.image`) of parsed JSON;
 * undefined when any step is missing.
 */
export function at(value: unknown, path: string): unknown {
  let current = value;
  for (const step of path.split(".")) {
    if (typeof current !== "object" || current === null) return undefined;
    current = (current as Record<string, unknown>)[step];
  }
  return current;
}

/** `Kind/namespace/name`: one object's identity, the same for every rendering of it. */
export function idOf(object: KubeObject): string {
  return `${object.kind}/${object.metadata.namespace ?? ""}/${object.metadata.name}`;
}

/** Runs `path ...args` with `input` on stdin; resolves with the exit code, never rejects on a non-zero one. */
export function runTool(
  path: string,
  args: readonly string[],
  options: { readonly input?: string; readonly env?: NodeJS.ProcessEnv } = {},
): Promise<ToolResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      path,
      args,
      { maxBuffer: 16 << 20, env: options.env ?? process.env },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== "number") reject(error);
        else resolve({ code: typeof error?.code === "number" ? error.code : 0, stdout, stderr });
      },
    );
    child.stdin?.end(options.input ?? "");
  });
}

/** The pinned kubectl against named sandbox clusters, each through its admin kubeconfig. */
export class Kubectl {
  readonly #path: string;
  readonly #cacheDir: string;
  readonly #kubeconfigOf: (cluster: string) => string;

  /** `cacheDir`: kubectl's discovery cache, private to the test. */
  constructor(path: string, cacheDir: string, kubeconfigOf: (cluster: string) => string) {
    this.#path = path;
    this.#cacheDir = cacheDir;
    this.#kubeconfigOf = kubeconfigOf;
  }

  /** Runs kubectl against `cluster`; never throws on a non-zero exit. */
  run(cluster: string, args: readonly string[], input?: string): Promise<ToolResult> {
    const kubeconfig = this.#kubeconfigOf(cluster);
    return runTool(this.#path, ["--kubeconfig", kubeconfig, "--cache-dir", this.#cacheDir, ...args], {
      ...(input === undefined ? {} : { input }),
      env: { ...process.env, KUBECONFIG: kubeconfig },
    });
  }

  /** Runs kubectl and fails the test on a non-zero exit; resolves with stdout. */
  async ok(cluster: string, args: readonly string[], input?: string): Promise<string> {
    const result = await this.run(cluster, args, input);
    assert.equal(result.code, 0, `kubectl ${args.join(" ")} exited ${result.code}:\n${result.stderr}${result.stdout}`);
    return result.stdout;
  }

  async getJson(cluster: string, args: readonly string[], input?: string): Promise<unknown> {
    return JSON.parse(await this.ok(cluster, ["get", ...args, "-o", "json"], input));
  }

  /** `kubectl auth can-i` as `user`: true for "yes", false for "no", a failure for anything else. */
  async canI(cluster: string, user: string, args: readonly string[]): Promise<boolean> {
    const result = await this.run(cluster, ["auth", "can-i", "--as", user, ...args]);
    const answer = result.stdout.trim();
    assert.ok(answer === "yes" || answer === "no", `can-i ${args.join(" ")}: ${result.stderr}${result.stdout}`);
    return answer === "yes";
  }
}

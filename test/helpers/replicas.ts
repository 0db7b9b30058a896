/**
 * Replicas of one fleet-mirror Deployment as real OS processes (`fleet-mirror run` from the
 * TypeScript sources, or from `dist/` with `entry: "dist"`), for tests of leader election
 * and sharding on the real API servers.
 *
 * Each replica is what a Pod of the Deployment would be:
 * - its own Pod object in the controller's namespace (a placeholder: the sandbox has no
 *   scheduler or kubelet, so it stays Pending) and a ServiceAccount token bound to that
 *   Pod, as the kubelet's projected token is. All replicas share the ServiceAccount
 *   fleet-mirror/fleet-mirror and its RBAC (`deploy/rbac/local.yaml`), as in production;
 *   the API server's audit log tells them apart by the Pod name (test/helpers/audit.ts);
 * - `POD_NAME` set to that name, which is the replica's default Lease identity;
 * - optionally its own fault proxy between it and the local API server (remote API
 *   servers are reached directly), so a test can cut one replica off the local API:
 *   `partition()` stalls every request and stream through that proxy, as a black-holed
 *   network does; `heal()` lets held requests through again, unless their client gave up.
 *
 * Teardown: `stop()` ends every process (SIGKILL) and proxy, and deletes the Pods; the
 * processes are started through `setpriv --pdeathsig SIGKILL` where it exists, so they
 * also die with the test process whatever way it ends.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { accessSync, constants, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import { type FaultProxy, startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import type { AdminStatus } from "../../src/admin/source.ts";
import { PROCESS_ENV, PROCESS_NODE_FLAGS } from "../../src/cli/process-flags.ts";
import { CONTROLLER_NAMESPACE, ControllerProcess, type Fleet } from "./fleet.ts";
import { eventually } from "./kube.ts";
import { deletePlaceholderPod, podBoundToken } from "./pod-token.ts";

const MAIN = {
  src: new URL("../../src/main.ts", import.meta.url).pathname,
  dist: new URL("../../dist/src/main.js", import.meta.url).pathname,
};
const SETPRIV = "/usr/bin/setpriv";

function hasSetpriv(): boolean {
  try {
    accessSync(SETPRIV, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** How one run of a replica's process ended. */
export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Date.now() when the exit was seen. */
  readonly at: number;
}

export interface ReplicaOptions {
  /** Arguments after `fleet-mirror run --kubeconfig … --namespace … --log-level info --admin-addr 127.0.0.1:0`. */
  readonly args?: readonly string[];
  /** Put a fault proxy between this replica and the local API server (needed for `partition()`). Default false. */
  readonly proxied?: boolean;
  /** "dist": the compiled build (`npm run build`), as the image runs it; default: the TS sources. */
  readonly entry?: "src" | "dist";
  /**
   * The path of another build's `dist/src/main.js` (a checkout of another commit, for
   * benchmarks that run two versions side by side); overrides `entry`.
   */
  readonly main?: string;
  /**
   * The CPUs the process may run on (a `taskset` CPU list such as "1"), for benchmarks
   * that keep the replicas off the control plane's CPUs; default: every CPU.
   */
  readonly cpus?: string;
}

/** One pino JSON log line, parsed; undefined for anything else (e.g. a line still arriving). */
function logLine(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

export class Replica {
  /** The Pod name: the identity in the audit log, and the default Lease holder identity. */
  readonly name: string;
  readonly proxy: FaultProxy | undefined;
  readonly #kubeconfigPath: string;
  readonly #args: readonly string[];
  readonly #main: string;
  readonly #cpus: string | undefined;
  #process: ControllerProcess | undefined;
  #exit: Promise<Exit> | undefined;
  /** How each earlier run ended, oldest first. */
  readonly exits: Exit[] = [];
  /** The output of every run so far, for a failure's diagnostics. */
  #earlierOutput = "";

  constructor(
    name: string,
    kubeconfigPath: string,
    args: readonly string[],
    proxy?: FaultProxy,
    main = MAIN.src,
    cpus?: string,
  ) {
    this.name = name;
    this.#main = main;
    this.#cpus = cpus;
    this.#kubeconfigPath = kubeconfigPath;
    this.#args = args;
    this.proxy = proxy;
  }

  /** The current run's process; throws before the first `start()`. */
  get process(): ControllerProcess {
    if (!this.#process) throw new Error(`replica ${this.name} was never started`);
    return this.#process;
  }

  get running(): boolean {
    const child = this.#process?.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.#process?.child.pid;
  }

  /** Starts a run of the process (with the same Pod, token and proxy as every run). Idempotent while running. */
  start(): void {
    if (this.running) return;
    if (this.#process) this.#earlierOutput += this.#process.output;
    const argv = [
      this.#main,
      "run",
      "--kubeconfig",
      this.#kubeconfigPath,
      "--namespace",
      CONTROLLER_NAMESPACE,
      "--log-level",
      "info",
      "--admin-addr",
      "127.0.0.1:0",
      ...this.#args,
    ];
    const [exec, execArgs] = hasSetpriv()
      ? [SETPRIV, ["--pdeathsig", "SIGKILL", "--", process.execPath, ...PROCESS_NODE_FLAGS, ...argv]]
      : [process.execPath, [...PROCESS_NODE_FLAGS, ...argv]];
    // taskset execs the command: the pid, and so kill() and the exit, stay the replica's.
    const [command, args] = this.#cpus ? ["taskset", ["-c", this.#cpus, exec, ...execArgs]] : [exec, execArgs];
    const child = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...PROCESS_ENV, POD_NAME: this.name, POD_NAMESPACE: CONTROLLER_NAMESPACE },
    });
    const controller = new ControllerProcess(child);
    this.#process = controller;
    this.#exit = once(child, "exit").then(([code, signal]) => {
      const exit = { code: code as number | null, signal: signal as NodeJS.Signals | null, at: Date.now() };
      this.exits.push(exit);
      return exit;
    });
  }

  /** Resolves with how the current run ended, once it has. */
  async exited(): Promise<Exit> {
    if (!this.#exit) throw new Error(`replica ${this.name} was never started`);
    return this.#exit;
  }

  /** kill -9: no shutdown, no Lease release. Resolves once the process is gone. */
  async kill(): Promise<Exit> {
    if (this.running) this.process.child.kill("SIGKILL");
    return this.exited();
  }

  /**
   * SIGTERM, as the kubelet sends on a Pod's deletion or a rolling update; resolves with
   * the exit once the process is gone, or kills it after `graceMs` (the Pod's grace period).
   */
  async terminate(graceMs = 30_000): Promise<Exit> {
    if (!this.running) return this.exited();
    const child = this.process.child;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    try {
      return await this.exited();
    } finally {
      clearTimeout(timer);
    }
  }

  /** Cuts this replica off the local API server: every request and open stream through its proxy hangs. */
  partition(): void {
    if (!this.proxy) throw new Error(`replica ${this.name} has no fault proxy: start it with proxied: true`);
    this.proxy.setRules({ stall: true });
  }

  /** Ends a partition: held requests are forwarded (unless their client gave up), new ones pass. */
  heal(): void {
    this.proxy?.setRules({});
  }

  /** The parsed JSON log lines of the current run so far. */
  logLines(): Record<string, unknown>[] {
    const lines: Record<string, unknown>[] = [];
    for (const text of (this.#process?.output ?? "").split("\n")) {
      const line = logLine(text);
      if (line) lines.push(line);
    }
    return lines;
  }

  hasLog(pattern: RegExp): boolean {
    return this.logLines().some((line) => typeof line["msg"] === "string" && pattern.test(line["msg"]));
  }

  /** Resolves once the current run logged a message matching `pattern`; throws if the run ends first. */
  async waitForLog(pattern: RegExp, timeoutMs = 60_000): Promise<void> {
    await eventually(
      `log line ${pattern} from ${this.name}`,
      () => {
        if (this.hasLog(pattern)) return true;
        if (!this.running) throw new Error(`${this.name} exited before logging ${pattern}`);
        return undefined;
      },
      timeoutMs,
    );
  }

  /** The current run's /status document. */
  async status(): Promise<AdminStatus> {
    const response = await fetch(`${await this.process.adminUrl()}/status`);
    if (response.status !== 200) throw new Error(`${this.name} /status answered ${response.status}`);
    return (await response.json()) as AdminStatus;
  }

  /** Polls /status until `accept` returns a value (not undefined), and returns that value. */
  async waitForStatus<T>(what: string, accept: (status: AdminStatus) => T | undefined, timeoutMs = 60_000): Promise<T> {
    return eventually(`${this.name} /status: ${what}`, async () => accept(await this.status()), timeoutMs);
  }

  /** The last `lines` lines of every run's output, for a failing test's diagnostics. */
  tail(lines = 40): string {
    const output = `${this.#earlierOutput}${this.#process?.output ?? ""}`.trimEnd().split("\n").slice(-lines);
    return `--- ${this.name} (exits ${JSON.stringify(this.exits)}) ---\n${output.join("\n")}`;
  }

  /** Used by `Replicas.stop()`: kills the process and stops the proxy. */
  async dispose(): Promise<void> {
    if (this.running) await this.kill();
    await this.proxy?.stop();
  }
}

/** The replicas of one Deployment. */
export class Replicas {
  readonly #fleet: Fleet;
  readonly #core: CoreV1Api;
  readonly #all = new Map<string, Replica>();

  constructor(fleet: Fleet) {
    this.#fleet = fleet;
    this.#core = fleet.kubeConfig("local").makeApiClient(CoreV1Api);
  }

  get list(): Replica[] {
    return [...this.#all.values()];
  }

  get(name: string): Replica {
    const replica = this.#all.get(name);
    if (!replica) throw new Error(`no replica ${name} (have: ${[...this.#all.keys()].join(", ")})`);
    return replica;
  }

  /**
   * Creates replica `name` (its Pod, a Pod-bound token, a kubeconfig, a fault proxy when
   * `proxied`) and starts its process. Does not wait for it to be ready.
   */
  async add(name: string, options: ReplicaOptions = {}): Promise<Replica> {
    if (this.#all.has(name)) throw new Error(`replica ${name} exists already`);
    const main = options.main ?? MAIN[options.entry ?? "src"];
    if (!existsSync(main)) throw new Error(`${main} does not exist: run \`npm run build\` first`);
    const token = await podBoundToken(this.#core, name);
    const local = this.#fleet.plane.cluster("local");
    const proxy = options.proxied ? await startFaultProxyFor(this.#fleet.plane, "local") : undefined;
    const kubeconfigPath = join(this.#fleet.plane.dir, `replica-${name}.kubeconfig`);
    writeFileSync(
      kubeconfigPath,
      renderKubeconfig({
        cluster: "local",
        server: proxy?.url ?? local.server,
        caPem: local.caPem,
        user: name,
        auth: { token },
      }),
      { mode: 0o600 },
    );
    const replica = new Replica(name, kubeconfigPath, options.args ?? [], proxy, main, options.cpus);
    this.#all.set(name, replica);
    replica.start();
    return replica;
  }

  /** Adds replicas `${prefix}-0` … `${prefix}-${count - 1}` in parallel. */
  async addMany(prefix: string, count: number, options: ReplicaOptions = {}): Promise<Replica[]> {
    return Promise.all(Array.from({ length: count }, (_, i) => this.add(`${prefix}-${i}`, options)));
  }

  /** The last log lines of every replica, for a failing test's diagnostics. */
  tails(lines = 40): string {
    return this.list.map((r) => r.tail(lines)).join("\n");
  }

  /** Kills every replica, stops every proxy and deletes the Pods. Idempotent. */
  async stop(): Promise<void> {
    const replicas = this.list;
    this.#all.clear();
    await Promise.all(replicas.map((r) => r.dispose()));
    await Promise.all(replicas.map((r) => deletePlaceholderPod(this.#core, r.name)));
  }
}

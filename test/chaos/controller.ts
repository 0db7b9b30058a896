/**
 * What a chaos run starts, faults and checks on the controller side, behind one
 * interface: one controller process (`SingleController`, here), or the replicas of a
 * sharded Deployment (`ChaosReplicas`, replica-faults.ts). The run (run.ts) drives the
 * remotes, the schedule and the oracle the same way for both.
 */
import type { ControllerProcess, Fleet } from "../helpers/fleet.ts";
import type { Step } from "./steps.ts";

/** Where a controller side reports what went wrong (failures) and what is merely odd (notes). */
export interface ChaosFindings {
  readonly problems: string[];
  readonly notes: string[];
}

/** The steps a controller side applies; every other step is the run's. */
export type ControllerStep = Extract<
  Step,
  {
    kind:
      | "kill-controller"
      | "term-controller"
      | "kill-replica"
      | "start-replica"
      | "term-replica"
      | "partition-replica";
  }
>;

export function isControllerStep(step: Step): step is ControllerStep {
  return [
    "kill-controller",
    "term-controller",
    "kill-replica",
    "start-replica",
    "term-replica",
    "partition-replica",
  ].includes(step.kind);
}

export interface ChaosControllers {
  /** Starts every process; does not wait for readiness (the oracle's first match does). */
  start(): Promise<void>;
  /** Applies a controller fault; a step this side does not know is a failure of the run's set-up. */
  apply(step: ControllerStep): Promise<void>;
  /** Ends every fault: everything healed and running again (a process that died by itself is a problem). */
  quiesce(): Promise<void>;
  /** Process restarts caused by the schedule (kills and SIGTERMs). */
  readonly restarts: number;
  /** The checks that only this side can make once the mirrors match the oracle; returns failures. */
  verify(): Promise<string[]>;
  /**
   * Warnings, errors and the last lines of every process, for a failure message (a
   * sharded run also saves every replica's whole output to a file and names it).
   */
  diagnostics(lines?: number): string;
  /** Kills everything (SIGKILL). Idempotent; never throws. */
  stop(): Promise<void>;
}

/** Whether a controller run had installed its SIGTERM handler (run.ts logs "fleet-mirror starting" in the same tick). */
export function handlesSigterm(process: ControllerProcess): boolean {
  return process.output.includes('"msg":"fleet-mirror starting"');
}

/** Warnings and errors, then the last lines, of `output` (pino JSON lines). */
export function logTailOf(title: string, output: string, lines: number): string {
  const all = output.split("\n");
  const interesting = all.filter((l) => /"level":(40|50|60)/.test(l));
  return [
    `-- ${title} warnings/errors (last ${lines} of ${interesting.length}) --`,
    ...interesting.slice(-lines),
    `-- ${title} log tail --`,
    ...all.slice(-lines),
  ].join("\n");
}

/** One controller process (`fleet-mirror run`, not leader-elected), restarted by kill -9 and SIGTERM steps. */
export class SingleController implements ChaosControllers {
  readonly #fleet: Fleet;
  readonly #findings: ChaosFindings;
  #controller: ControllerProcess | undefined;
  /** Output of the incarnations that ended, most recent last. */
  readonly #pastOutputs: string[] = [];
  restarts = 0;

  constructor(fleet: Fleet, findings: ChaosFindings) {
    this.#fleet = fleet;
    this.#findings = findings;
  }

  async start(): Promise<void> {
    this.#controller = await this.#fleet.startProcess([
      "--blocked-recheck-period",
      "2s",
      // A host that leaves a headless Service is kept for --headless-host-grace (SPEC §12):
      // the oracle expects today's hosts once the run settles, so the grace must end
      // well inside the settle window.
      "--headless-host-grace",
      "2s",
    ]);
  }

  async apply(step: ControllerStep): Promise<void> {
    switch (step.kind) {
      case "kill-controller":
      case "term-controller":
        await this.#stop(step.kind === "kill-controller" ? "SIGKILL" : "SIGTERM");
        this.restarts++;
        await this.start();
        return;
      default:
        throw new Error(`step ${step.kind} needs the replicas of a sharded run (--replicas)`);
    }
  }

  async #stop(signal: NodeJS.Signals): Promise<void> {
    const controller = this.#controller;
    if (!controller) return;
    this.#controller = undefined;
    const started = Date.now();
    const handlerInstalled = handlesSigterm(controller);
    // SIGTERM must end the controller promptly (run.ts finishes in-flight writes only).
    const killer = setTimeout(() => {
      this.#findings.problems.push(`controller still running 20 s after ${signal}; killed`);
      controller.child.kill("SIGKILL");
    }, 20_000);
    const code = await controller.stop(signal);
    clearTimeout(killer);
    this.#pastOutputs.push(controller.output);
    if (signal === "SIGTERM" && code !== 0) {
      const how = `controller exited ${code ?? `by ${controller.child.signalCode}`} on SIGTERM (after ${Date.now() - started} ms)`;
      // Before its handler exists, a SIGTERM ends the process by default: nothing was written yet.
      if (!handlerInstalled && controller.child.signalCode === "SIGTERM")
        this.#findings.notes.push(`${how}, during start-up`);
      else this.#findings.problems.push(how);
    }
  }

  async quiesce(): Promise<void> {
    const controller = this.#controller;
    if (controller && controller.child.exitCode === null && controller.child.signalCode === null) return;
    if (controller) {
      this.#findings.problems.push(`controller died by itself (exit ${controller.child.exitCode})`);
      this.#pastOutputs.push(controller.output);
    }
    await this.start();
  }

  async verify(): Promise<string[]> {
    const controller = this.#controller;
    if (controller && (controller.child.exitCode !== null || controller.child.signalCode !== null))
      return [`the controller died: exit ${controller.child.exitCode} ${controller.child.signalCode}`];
    return [];
  }

  diagnostics(lines = 60): string {
    return logTailOf("controller", [...this.#pastOutputs, this.#controller?.output ?? ""].join(""), lines);
  }

  async stop(): Promise<void> {
    await this.#stop("SIGKILL").catch(() => undefined);
  }
}

/**
 * The chaos schedule's changes to the other ways of exporting (SPEC §11, §12): label
 * export toggled (with look-alike and negative values), §2 annotations put on and taken
 * off the same Services (they win over the label), fleet-wide members joining and
 * leaving and changing ports (so members disagree), MCS ServiceExports created and
 * deleted, and a headless Service's hosts appearing and disappearing. Pure and seeded
 * like the rest of the schedule, from its own stream (schedule.ts interleaves it), so
 * the other steps of a seed are the ones they were before these existed.
 *
 * The model here only picks sensible steps; the oracle reads the remotes as they are.
 */
import { Draw } from "./draw.ts";
import {
  GATEWAYS,
  type GatewayRef,
  HEADLESS_HOSTS,
  MCS_SERVICES,
  MISSING_GATEWAY,
  MODE_PORTS,
  MODE_SERVICES,
  type ModeStep,
} from "./steps.ts";

interface ModeService {
  label: string | null;
  annotated: boolean;
  member: boolean;
  ports: number;
}

/**
 * What every remote holds at set-up (setup.ts makes exactly this): the headless Service's
 * hosts; `m-0` exported by label and a member, `m-1` a member (so a fleet-wide Service
 * has a member per cluster from the start); a ServiceExport of `api-0`.
 */
export const INITIAL_HOSTS: readonly string[] = ["db-0", "db-1"];
export const INITIAL_LABELLED: readonly string[] = ["m-0"];
export const INITIAL_MEMBERS: readonly string[] = ["m-0", "m-1"];
export const INITIAL_SERVICE_EXPORTS: readonly string[] = ["api-0"];

/** Export label values: the selector's, look-alikes (reported, not exported) and a negative (declined). */
const LABEL_VALUES = ["true", "true", "true", "True", "yes", "false"] as const;

export class ModeSchedule {
  readonly #draw: Draw;
  readonly #clusters: readonly string[];
  readonly #mcs: boolean;
  readonly #services = new Map<string, ModeService>();
  readonly #exports = new Map<string, boolean>();
  readonly #hosts = new Map<string, readonly string[]>();

  /** `mcs`: the remotes serve ServiceExports (else no `service-export` step is drawn). */
  constructor(options: { readonly random: () => number; readonly clusters: readonly string[]; readonly mcs: boolean }) {
    this.#draw = new Draw(options.random);
    this.#clusters = options.clusters;
    this.#mcs = options.mcs;
    for (const cluster of options.clusters) {
      for (const name of MODE_SERVICES)
        this.#services.set(`${cluster}/${name}`, {
          label: INITIAL_LABELLED.includes(name) ? "true" : null,
          annotated: false,
          member: INITIAL_MEMBERS.includes(name),
          ports: 0,
        });
      for (const name of INITIAL_SERVICE_EXPORTS) this.#exports.set(`${cluster}/${name}`, true);
      this.#hosts.set(cluster, INITIAL_HOSTS);
    }
  }

  /** The next step and the pause after it. */
  next(): ModeStep & { readonly pauseMs: number } {
    const step = this.#step();
    return { ...step, pauseMs: 100 + Math.floor(this.#draw.random() * 1_401) };
  }

  #step(): ModeStep {
    const cluster = this.#draw.pick(this.#clusters);
    const kind = this.#draw.weighted<ModeStep["kind"]>([
      [3, "label-export"],
      [1.5, "annotate-export"],
      [3, "member"],
      [1.5, "mode-ports"],
      [this.#mcs ? 2.5 : 0, "service-export"],
      [2, "headless-hosts"],
    ]);
    switch (kind) {
      case "service-export": {
        const name = this.#draw.pick(MCS_SERVICES);
        const key = `${cluster}/${name}`;
        const exported = !this.#exports.get(key);
        this.#exports.set(key, exported);
        return { kind, cluster, name, exported };
      }
      case "headless-hosts": {
        // Never no host: with none, the mirror keeps the shape last seen (SPEC §12), a
        // history the oracle, which reads only the remotes' end state, does not model.
        const count = 1 + Math.floor(this.#draw.random() * 3);
        const hosts = new Set<string>();
        while (hosts.size < count) hosts.add(this.#draw.pick(HEADLESS_HOSTS));
        const sorted = [...hosts].sort();
        this.#hosts.set(cluster, sorted);
        return { kind, cluster, hosts: sorted };
      }
      default:
        return this.#serviceStep(cluster, kind);
    }
  }

  #serviceStep(cluster: string, kind: ModeStep["kind"]): ModeStep {
    const name = this.#draw.pick(MODE_SERVICES);
    const model = this.#services.get(`${cluster}/${name}`) ?? {
      label: null,
      annotated: false,
      member: false,
      ports: 0,
    };
    this.#services.set(`${cluster}/${name}`, model);
    switch (kind) {
      case "label-export": {
        const value = model.label === null ? this.#draw.pick(LABEL_VALUES) : this.#draw.random() < 0.6 ? null : "true";
        model.label = value;
        return { kind, cluster, name, value };
      }
      case "annotate-export": {
        model.annotated = !model.annotated;
        const gateway: GatewayRef | null = model.annotated
          ? this.#draw.weighted<GatewayRef>([
              [3, GATEWAYS[0] ?? MISSING_GATEWAY],
              [1, MISSING_GATEWAY],
            ])
          : null;
        return { kind, cluster, name, gateway };
      }
      case "member":
        model.member = !model.member;
        return { kind, cluster, name, join: model.member };
      default: {
        model.ports = (model.ports + 1) % MODE_PORTS.length;
        return { kind: "mode-ports", cluster, name, ports: MODE_PORTS[model.ports] ?? [] };
      }
    }
  }
}

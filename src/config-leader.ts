/**
 * The leader-election and sharding flags of `run` (DESIGN §5, "Leader election" and
 * "Sharding across replicas"): the Lease, its timings, the shards. config.ts spreads
 * these flags into `run`'s table, this parse into its Config, and checks them with the
 * rest once the whole Config is known.
 */
import { hostname } from "node:os";
import { ConfigError, parseNumericFlag } from "./flag-values.ts";

export interface LeaderConfig {
  /** Run for leadership of a coordination.k8s.io Lease; only the leader runs the controller. */
  readonly leaderElect: boolean;
  readonly leaderElectionNamespace: string;
  readonly leaderElectionId: string;
  /** Identity written into the Lease (default: $POD_NAME, else hostname_pid). */
  readonly leaderElectionIdentity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  /**
   * Sharding across replicas: clusters are mapped to this many shards, each held through
   * its own Lease (`<leader-election-id>-shard-<i>`); 1 (default) = not sharded. > 1
   * needs --leader-elect.
   */
  readonly shards: number;
  /**
   * Sharded: the Deployment's replica count. A starting replica takes shards as soon as
   * it sees this many live replicas, instead of after the join's quiet window (one retry
   * period); 0 (default) = unknown, always the window.
   */
  readonly expectedReplicas: number;
}

export const leaderFlags = {
  "leader-elect": {
    type: "boolean",
    default: false,
    description: "run for leadership of a Lease; only the leader mirrors (set it when running 2+ replicas)",
  },
  "leader-election-namespace": {
    type: "string",
    description: "namespace of the leader-election Lease (default: --namespace)",
  },
  "leader-election-id": { type: "string", default: "fleet-mirror", description: "name of the leader-election Lease" },
  "leader-election-identity": {
    type: "string",
    description: "this replica's identity in the Lease (default: $POD_NAME, else hostname_pid)",
  },
  "leader-election-lease-duration": {
    type: "string",
    default: "10s",
    description: "how long a Lease is valid after its last renewal",
  },
  "leader-election-renew-deadline": {
    type: "string",
    default: "7s",
    description: "a leader that cannot renew within this stops writing and exits",
  },
  "leader-election-retry-period": {
    type: "string",
    default: "2s",
    description: "how often the Lease is renewed or tried",
  },
  shards: {
    type: "string",
    default: "1",
    description:
      "spread the clusters over N shards, each held by one replica through its own Lease (needs --leader-elect)",
  },
  "expected-replicas": {
    type: "string",
    default: "0",
    description:
      "with --shards: the Deployment's replica count; a starting replica takes its shards once it sees that many, without waiting a retry period for more (0: unknown)",
  },
} as const;

/** The leader-election fields of the Config; `namespace`: the controller's (the Lease's default). */
export function parseLeaderFlags(
  values: Readonly<Record<string, string | boolean | undefined>>,
  str: (name: keyof typeof leaderFlags) => string,
  namespace: string,
  env: Readonly<Record<string, string | undefined>>,
): LeaderConfig {
  return {
    leaderElect: values["leader-elect"] === true,
    leaderElectionNamespace:
      typeof values["leader-election-namespace"] === "string" ? values["leader-election-namespace"] : namespace,
    leaderElectionId: str("leader-election-id"),
    leaderElectionIdentity:
      typeof values["leader-election-identity"] === "string"
        ? values["leader-election-identity"]
        : env["POD_NAME"] || `${hostname()}_${process.pid}`,
    leaseDurationMs: parseNumericFlag("leader-election-lease-duration", str("leader-election-lease-duration")),
    renewDeadlineMs: parseNumericFlag("leader-election-renew-deadline", str("leader-election-renew-deadline")),
    retryPeriodMs: parseNumericFlag("leader-election-retry-period", str("leader-election-retry-period")),
    shards: parseNumericFlag("shards", str("shards")),
    expectedReplicas: parseNumericFlag("expected-replicas", str("expected-replicas")),
  };
}

/** The rules between the leader-election flags (and `--dry-run`'s with them). */
export function validateLeaderFlags(config: LeaderConfig): void {
  if (config.shards > 1 && !config.leaderElect)
    throw new ConfigError(`--shards ${config.shards}: needs --leader-elect (each shard is held through a Lease)`);
  if (config.expectedReplicas > 0 && config.shards === 1)
    throw new ConfigError(
      `--expected-replicas ${config.expectedReplicas}: only applies with --shards (the join of a sharded replica)`,
    );
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(config.leaderElectionId) || config.leaderElectionId.length > 253)
    throw new ConfigError("--leader-election-id: must be a DNS subdomain name (a Lease's name)");
  if (config.leaderElectionIdentity === "") throw new ConfigError("--leader-election-identity: must not be empty");
  // The leader must give up (renew deadline) before the Lease can
  // expire for the others, and try more often than it must succeed.
  if (!(config.leaseDurationMs > config.renewDeadlineMs && config.renewDeadlineMs > config.retryPeriodMs))
    throw new ConfigError(
      "--leader-election-lease-duration > --leader-election-renew-deadline > --leader-election-retry-period must hold",
    );
}

/**
 * The flags that bound what one remote cluster can cost the process and the local
 * cluster (docs/CLI.md, "Limits"): the largest response body read from any API server,
 * and per cluster the local Services its exports ask for, the per-host Services of one
 * headless Service, and the Namespaces created for it. Each has a default and is
 * reported when reached; config.ts spreads these flags into `run`'s and this parse
 * into its Config.
 */
import { type NumericFlag, parseNumericFlag } from "./flag-values.ts";

export interface LimitsConfig {
  /** Largest response body read from any API server, in MiB (`--max-response-mb`). */
  readonly maxResponseMb: number;
  /** Local Services one cluster's exports may ask for; 0: no limit (`--max-mirrors-per-cluster`). */
  readonly maxMirrorsPerCluster: number;
  /** Per-host Services of one exported headless Service (`--max-hosts-per-headless-service`). */
  readonly maxHostsPerHeadlessService: number;
  /** Namespaces fleet-mirror may create for one cluster; 0: no limit (`--max-namespaces-per-cluster`). */
  readonly maxNamespacesPerCluster: number;
}

export const limitFlags = {
  "max-response-mb": {
    type: "string",
    default: "64",
    description:
      "largest response body read from any API server (a list page, an object); a larger one fails that request, reported as response-too-large",
  },
  "max-mirrors-per-cluster": {
    type: "string",
    default: "2000",
    description:
      "local Services (mirrors, per-host, fleet-wide and import parts) one cluster's exports may ask for; the rest, in name order, are reported and not written (0: no limit)",
  },
  "max-hosts-per-headless-service": {
    type: "string",
    default: "1000",
    description: "per-host Services of one exported headless Service; hosts past it, in name order, are reported",
  },
  "max-namespaces-per-cluster": {
    type: "string",
    default: "100",
    description:
      "Namespaces created for one cluster's mirrors (with --create-namespaces); mirrors that need more are reported and not written (0: no limit)",
  },
} as const;

/** Parses the limit flags from `str` (a flag's text value, its default when not given). */
export function parseLimits(str: (name: keyof typeof limitFlags & NumericFlag) => string): LimitsConfig {
  return {
    maxResponseMb: parseNumericFlag("max-response-mb", str("max-response-mb")),
    maxMirrorsPerCluster: parseNumericFlag("max-mirrors-per-cluster", str("max-mirrors-per-cluster")),
    maxHostsPerHeadlessService: parseNumericFlag(
      "max-hosts-per-headless-service",
      str("max-hosts-per-headless-service"),
    ),
    maxNamespacesPerCluster: parseNumericFlag("max-namespaces-per-cluster", str("max-namespaces-per-cluster")),
  };
}

/** `--max-response-mb` in bytes, as the API clients take it. */
export const responseCapBytes = (config: LimitsConfig): number => config.maxResponseMb * 1024 * 1024;

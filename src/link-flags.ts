/**
 * The `run` flag of Link registration (SPEC §15, docs/CLI.md): the namespace whose
 * linkerd `Link` resources register clusters, beside the credentials Secrets of SPEC §1.
 * Off unless given. Parsed once into `Config` (config.ts spreads it in).
 */
import { ConfigError } from "./flag-values.ts";

export interface LinkConfig {
  /** The namespace of the Links that register clusters (`--links`); undefined: Links are not read. */
  readonly linksNamespace: string | undefined;
}

export const linkFlags = {
  links: {
    type: "string",
    description:
      "register the clusters of the linkerd Links (multicluster.linkerd.io) in this namespace, usually linkerd-multicluster (default: off)",
  },
} as const;

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function parseLinkFlags(values: Record<string, string | boolean | undefined>): LinkConfig {
  const given = values["links"];
  if (typeof given !== "string") return { linksNamespace: undefined };
  const namespace = given.trim();
  if (!DNS1123_LABEL.test(namespace) || namespace.length > 63)
    throw new ConfigError(
      `--links: ${JSON.stringify(given)} is not a namespace name (the namespace of the Links, e.g. linkerd-multicluster)`,
    );
  return { linksNamespace: namespace };
}

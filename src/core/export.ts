/**
 * Whether a remote Service is exported, how, and through which gateway (SPEC §2, §12).
 * Pure: a function of the Service and of its cluster's export settings.
 *
 * Precedence (SPEC §12): the §2 annotations (both of them) name the gateway and win; a
 * Service without them but matching the export selector (`--export-selector`, by
 * default `mirror.linkerd.io/exported=true`) is exported through its cluster's default
 * gateway, named by the credentials Secret (§1) or else `linkerd-gateway` in
 * `linkerd-multicluster`. A label whose value only looks like the selector's ("True",
 * "yes" for "true") is a user's mistake, not a choice: it exports nothing and is
 * reported. An explicit negative ("false", "no", "0", "off" for a selector value of
 * "true") is a user's choice: it exports nothing, is counted as declined, and is not a
 * problem.
 */

import type { LabelRequirement } from "./label-requirement.ts";
import { selects } from "./label-selector.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "./labels.ts";
import type { LinkSettings } from "./link.ts";
import type { Service } from "./objects.ts";

/** The label of linkerd's label export, and the default export selector's key. */
export const EXPORTED_LABEL = "mirror.linkerd.io/exported";
export const DEFAULT_EXPORT_SELECTOR = `${EXPORTED_LABEL}=true`;

/** A gateway Service in the remote cluster. */
export interface GatewayRef {
  readonly name: string;
  readonly namespace: string;
}

/**
 * A cluster's default gateway when its Secret names none: the gateway that a linkerd
 * multicluster link installs. Used by label export (SPEC §12) and by fleet-wide
 * members without §2 annotations (SPEC §11).
 */
export const DEFAULT_GATEWAY: GatewayRef = Object.freeze({
  name: "linkerd-gateway",
  namespace: "linkerd-multicluster",
});

/** What a cluster's actor needs to decide exports. Plain data; part of ClusterSettings. */
export interface ExportSettings {
  /** The cluster's default gateway (its Secret's annotations, else DEFAULT_GATEWAY). */
  readonly defaultGateway: GatewayRef;
  /** Label export's selector; absent: label export is off (`--export-selector ""`). */
  readonly exportSelector?: LabelRequirement;
  /**
   * Set for a cluster a Link registers (SPEC §15): its selectors alone decide what is
   * exported (neither the §2 annotations nor `--export-selector` apply), every export
   * goes through the Link's gateway (`defaultGateway` is then `linkGatewayRef`), and
   * mirrors take linkerd's current shape (core/link-mirror.ts).
   */
  readonly link?: LinkSettings;
}

export const EXPORT_MODES = ["annotation", "label"] as const;
export type ExportMode = (typeof EXPORT_MODES)[number];

export type ExportDecision =
  | { readonly kind: "exported"; readonly mode: ExportMode; readonly gateway: GatewayRef }
  /** The selector's key with an explicit negative value: a choice, counted, not reported. */
  | { readonly kind: "declined"; readonly value: string }
  /** The selector's key with a value that looks like the selector's but is not: reported. */
  | { readonly kind: "label-value"; readonly message: string }
  | { readonly kind: "not-exported" };

const NOT_EXPORTED: ExportDecision = Object.freeze({ kind: "not-exported" });

/** The gateway named by a Service's §2 annotations: both, non-empty, or none. */
export function exportedGateway(service: Service): GatewayRef | undefined {
  const name = service.metadata.annotations?.[GATEWAY_NAME];
  const namespace = service.metadata.annotations?.[GATEWAY_NS];
  return name && namespace ? { name, namespace } : undefined;
}

const TRUE_LOOKALIKES = new Set(["true", "yes", "y", "1", "on"]);
const NEGATIVES = new Set(["false", "no", "n", "0", "off"]);

export function exportOf(settings: ExportSettings, service: Service): ExportDecision {
  const link = settings.link;
  if (link) {
    const labels = service.metadata.labels;
    return selects(link.selector, labels) || selects(link.remoteDiscoverySelector, labels)
      ? { kind: "exported", mode: "label", gateway: settings.defaultGateway }
      : NOT_EXPORTED;
  }
  const annotated = exportedGateway(service);
  if (annotated) return { kind: "exported", mode: "annotation", gateway: annotated };
  const selector = settings.exportSelector;
  const value = selector ? service.metadata.labels?.[selector.key] : undefined;
  if (!selector || value === undefined) return NOT_EXPORTED;
  if (value === selector.value) return { kind: "exported", mode: "label", gateway: settings.defaultGateway };
  const lower = value.toLowerCase();
  const wanted = selector.value.toLowerCase();
  if (wanted === "true" && NEGATIVES.has(lower)) return { kind: "declined", value };
  if (lower === wanted || (wanted === "true" && TRUE_LOOKALIKES.has(lower)))
    return {
      kind: "label-value",
      message: `label ${selector.key} is ${JSON.stringify(value)}; only ${JSON.stringify(selector.value)} exports (label values are exact and case-sensitive)`,
    };
  return NOT_EXPORTED;
}

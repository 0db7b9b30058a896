/**
 * One row per Link (SPEC §15) in `/status` and `fleet-mirror status`: which cluster it
 * names, the Secret it names, and whether it registers that cluster or why not. Types
 * only, so readers import them without the supervisor.
 */

/** What a Link is now: registered, or the reason (the Event reason of SPEC §15) it is not quite. */
export type LinkState = "registered" | "InvalidLink" | "InvalidCredentials" | "DuplicateCluster" | "CredentialsKept";

export interface LinkRow {
  /** The Link, `namespace/name`. */
  readonly link: string;
  /** `spec.targetClusterName` when the Link names one. */
  readonly cluster?: string;
  /** The credentials Secret it names, `namespace/name`, when it names one. */
  readonly secret?: string;
  readonly state: LinkState;
  /** The specific reason of an InvalidLink or InvalidCredentials (`invalid-cluster-name`, `credentials-missing`, ...). */
  readonly reason?: string;
  readonly message?: string;
}

/** Links are read but cannot be listed (the Link CRD not installed, a read denied): why. */
export interface LinksProblem {
  readonly namespace: string;
  readonly message: string;
}

/** Names and validation rules shared by every component (pure). */

/** The local name of the mirror of remote Service `service` from cluster `cluster` (SPEC §3). */
export function mirrorName(service: string, cluster: string): string {
  return `${service}-${cluster}`;
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Why `name` breaks a naming rule (empty, longer than `max`, or not matching `pattern`: `rule`), or undefined. */
function nameProblem(name: string, max: number, pattern: RegExp, rule: string): string | undefined {
  if (name.length === 0) return "must not be empty";
  if (name.length > max) return `must be at most ${max} characters (is ${name.length})`;
  return pattern.test(name) ? undefined : rule;
}

/** Why `name` is not a DNS-1123 label (Kubernetes' rule for cluster and namespace names), or undefined. */
export function validateDns1123Label(name: string): string | undefined {
  return nameProblem(
    name,
    63,
    DNS1123_LABEL,
    "must consist of lower case alphanumeric characters or '-', and start and end with an alphanumeric character",
  );
}

/**
 * Why `name` is not a DNS-1123 subdomain (Kubernetes' rule for the names of most objects,
 * Secrets and ServiceAccounts among them; also a cluster's DNS domain), or undefined.
 */
export function validateDns1123Subdomain(name: string): string | undefined {
  return nameProblem(
    name,
    253,
    DNS1123_SUBDOMAIN,
    "must consist of lower case alphanumeric characters, '-' or '.', and start and end with an alphanumeric character",
  );
}

/** Why `name` cannot name a Service (a DNS-1035 label), or undefined. */
export function validateMirrorName(name: string): string | undefined {
  if (name.length > 63) return `must be at most 63 characters (is ${name.length})`;
  if (!DNS1035_LABEL.test(name)) {
    return "must consist of lower case alphanumeric characters or '-', start with a letter and end with an alphanumeric character";
  }
  return undefined;
}

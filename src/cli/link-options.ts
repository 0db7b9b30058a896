/**
 * `link`'s flags, judged all at once before either cluster is reached: a bad flag is a
 * usage error (exit 2) and nothing is written anywhere. Pure.
 */
import { validateDns1123Label, validateDns1123Subdomain } from "../core/naming.ts";
import { durationFlag, type FlagValues, requiredFlag, stringFlag, UsageError } from "./common.ts";
import { type LinkResourceOptions, linkResourceOptions } from "./link-resource.ts";

/** The token's default lifetime with `--token-source request`: one year. */
export const DEFAULT_TOKEN_DURATION = "8760h";
/** The shortest token the API server hands out (its minimum `expirationSeconds`). */
const MIN_TOKEN_SECONDS = 600;

export interface LinkOptions {
  readonly cluster: string;
  readonly remoteKubeconfig: string;
  readonly tokenSource: "request" | "secret";
  readonly tokenSeconds: number;
  /** Limit of `--wait` and of a token Secret being filled in. */
  readonly timeoutMs: number;
  readonly format: "yaml" | "json";
  readonly apply: boolean;
  readonly wait: boolean;
  readonly secretName: string;
  readonly domain: string;
  /** `--service-account` (absent: the one of deploy/rbac/remote.yaml). */
  readonly serviceAccount: string | undefined;
  /** With `--links`: the Link's flags. */
  readonly links: LinkResourceOptions | undefined;
}

/** A flag naming an object: a DNS-1123 subdomain, as the API server requires. */
function subdomainFlag(values: FlagValues, flag: string, what: string): string | undefined {
  const value = stringFlag(values, flag);
  if (value === undefined) return undefined;
  const problem = validateDns1123Subdomain(value);
  if (problem) throw new UsageError(`--${flag} ${JSON.stringify(value)} is not ${what}: it ${problem}`);
  return value;
}

/** @throws UsageError naming the flag and what is wrong with it. */
export function linkOptions(values: FlagValues): LinkOptions {
  const cluster = requiredFlag(values, "cluster-name");
  const nameProblem = validateDns1123Label(cluster);
  if (nameProblem) throw new UsageError(`--cluster-name ${JSON.stringify(cluster)} ${nameProblem}`);
  const remoteKubeconfig = requiredFlag(values, "remote-kubeconfig");
  const tokenSource = stringFlag(values, "token-source") ?? "request";
  if (tokenSource !== "request" && tokenSource !== "secret")
    throw new UsageError(`--token-source: ${JSON.stringify(tokenSource)} must be request or secret`);
  const format = stringFlag(values, "output") ?? "yaml";
  if (format !== "yaml" && format !== "json") throw new UsageError(`-o/--output: must be yaml or json`);
  const links = linkResourceOptions(values);
  const apply = values["apply"] === true;
  const wait = values["wait"] === true;
  if (wait && !apply) throw new UsageError("--wait goes with --apply");
  const tokenSeconds = Math.round(durationFlag(values, "token-duration", DEFAULT_TOKEN_DURATION) / 1000);
  if (tokenSeconds < MIN_TOKEN_SECONDS)
    throw new UsageError("--token-duration: must be at least 10m (the API server's minimum)");
  const timeoutMs = durationFlag(values, "timeout", "60s");
  const secretName =
    subdomainFlag(values, "secret-name", "a Secret's name (a DNS-1123 subdomain)") ?? `cluster-credentials-${cluster}`;
  const domain = subdomainFlag(values, "cluster-domain", "a DNS name") ?? "cluster.local";
  const serviceAccount = subdomainFlag(values, "service-account", "a ServiceAccount's name (a DNS-1123 subdomain)");
  return {
    cluster,
    remoteKubeconfig,
    tokenSource,
    tokenSeconds,
    timeoutMs,
    format,
    apply,
    wait,
    secretName,
    domain,
    serviceAccount,
    links,
  };
}

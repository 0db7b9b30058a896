/**
 * The options every remote-cluster actor's init carries (RemoteActorOptions), from the
 * run's Config and the supervisor's test-only overrides: one place that maps flags to
 * what an actor reads.
 */
import type { Config } from "../config.ts";
import { responseCapBytes } from "../config-limits.ts";
import { gatewayPolicyOptions } from "../gateway-flags.ts";
import type { RemoteActorOptions } from "../protocol/messages.ts";

/** The supervisor's overrides (tests only, but for `batchDelayMs`). */
export interface ActorOptionOverrides {
  readonly batchDelayMs?: number;
  readonly watchInactivityTimeoutMs?: number;
  readonly deniedRetryMs?: number;
  readonly mcsRecheckMs?: number;
  readonly testHooks?: boolean;
  readonly gatewayDnsServers?: readonly string[];
}

export function remoteActorOptions(config: Config, o: ActorOptionOverrides): RemoteActorOptions {
  return {
    resolvePeriodMs: config.gatewayResolvePeriodMs,
    maxInFlight: 2,
    batchDelayMs: o.batchDelayMs ?? 10,
    logLevel: config.logLevel,
    memberSelector: config.federatedSelector,
    ...(o.watchInactivityTimeoutMs ? { watchInactivityTimeoutMs: o.watchInactivityTimeoutMs } : {}),
    ...(o.deniedRetryMs ? { deniedRetryMs: o.deniedRetryMs } : {}),
    mcsRecheckMs: o.mcsRecheckMs ?? config.mcsRecheckMs,
    headlessHostGraceMs: config.headlessHostGraceMs,
    maxResponseBytes: responseCapBytes(config),
    ...(o.testHooks === true ? { testHooks: true } : {}),
    ...(o.gatewayDnsServers ? { gatewayDnsServers: [...o.gatewayDnsServers] } : {}),
    gatewayPolicy: {
      ...gatewayPolicyOptions(config),
      ...(config.staleAfterMs > 0 ? { staleAfterMs: config.staleAfterMs } : {}),
    },
  };
}

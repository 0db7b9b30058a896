/**
 * The flags of the gateway address policy and caps (SPEC §10): parsed once at start-up,
 * a bad CIDR range refused naming the flag, and carried to every actor's options.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Config, parseRunConfig } from "../../src/config.ts";
import { ConfigError } from "../../src/flag-values.ts";
import { gatewayPolicyOptions } from "../../src/gateway-flags.ts";

function parse(args: readonly string[]): Config {
  const config = parseRunConfig(args, {});
  assert.notEqual(config, "help");
  return config as Config;
}

describe("the gateway address policy flags", () => {
  it("default to no operator ranges, 32 addresses per gateway, 64 probed gateways and 64 probes in flight per cluster", () => {
    assert.deepEqual(gatewayPolicyOptions(parse([])), {
      cidrAllow: [],
      cidrDeny: [],
      maxAddresses: 32,
      maxProbed: 64,
      maxProbesInFlight: 64,
    });
  });

  it("take comma-separated IPv4 and IPv6 ranges and the caps", () => {
    const config = parse([
      "--gateway-cidr-deny",
      "10.0.0.0/8, fd00::/8",
      "--gateway-cidr-allow=10.1.0.0/16",
      "--gateway-max-addresses",
      "4",
      "--gateway-max-probed",
      "2",
      "--gateway-max-probes-in-flight",
      "8",
    ]);
    assert.deepEqual(gatewayPolicyOptions(config), {
      cidrAllow: ["10.1.0.0/16"],
      cidrDeny: ["10.0.0.0/8", "fd00::/8"],
      maxAddresses: 4,
      maxProbed: 2,
      maxProbesInFlight: 8,
    });
  });

  it("refuses a value that is not a CIDR range at start-up, naming the flag and the value", () => {
    for (const [flag, value] of [
      ["gateway-cidr-deny", "10.0.0.0"],
      ["gateway-cidr-deny", "10.0.0.0/8,gw.example/24"],
      ["gateway-cidr-allow", "10.0.0.0/33"],
    ] as const) {
      assert.throws(
        () => parseRunConfig([`--${flag}`, value], {}),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.message.startsWith(`--${flag}: `) &&
          /is not|prefix/.test(error.message),
        `--${flag} ${value}`,
      );
    }
  });
});

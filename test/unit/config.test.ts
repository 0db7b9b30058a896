import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, it } from "node:test";
import { defaultConfig, flagsHelp, parseRunConfig, runFlags } from "../../src/config.ts";
import { ConfigError } from "../../src/flag-values.ts";

/** String flags whose value is not a number (everything else in runFlags is numeric). */
const NOT_NUMERIC = new Set([
  "cluster-name",
  "links",
  "kubeconfig",
  "context",
  "namespace",
  "exclude-namespaces",
  "log-level",
  "log-file",
  "leader-election-namespace",
  "leader-election-id",
  "leader-election-identity",
  "endpoints-api",
  "federated-selector",
  "export-selector",
  "gateway-cidr-allow",
  "gateway-cidr-deny",
]);

/**
 * Every numeric flag with values that must be refused at start-up, and the allowed range
 * its message must name. A value that passes here would crash or spin later (a writer
 * pool of 2.5 workers, a 0 ms re-check timer, a timer past Node's 24.8-day limit).
 */
const BAD_VALUES: Record<string, { readonly bad: readonly string[]; readonly allowed: RegExp }> = {
  "resync-period": { bad: ["0", "500ms", "-1s", "abc", "", "25h", "1e3"], allowed: /1s to 24h/ },
  "gateway-resolve-period": { bad: ["0", "999ms", "x", "48h"], allowed: /1s to 24h/ },
  "blocked-recheck-period": { bad: ["0", "0s", "0ms", "50ms", "never", "30d", "100h"], allowed: /100ms to 24h/ },
  "mcs-recheck-period": { bad: ["0", "500ms", "never", "25h"], allowed: /1s to 24h/ },
  "headless-host-grace": { bad: ["-1s", "never", "", "25h", "1e3"], allowed: /0s to 24h/ },
  "failback-delay": { bad: ["-1s", "soon", "", "25h"], allowed: /0s to 24h/ },
  "stale-after": { bad: ["-1s", "never", "", "25h"], allowed: /0s to 24h/ },
  "failover-min-ready": { bad: ["0", "-1", "1.5", "", "100001"], allowed: /whole number from 1 to 100000/ },
  "local-priority": { bad: ["-1", "1001", "1.5", "", "low"], allowed: /whole number from 0 to 1000/ },
  "write-concurrency": { bad: ["2.5", "0", "-1", "1e2", "0x10", "", " ", "eight", "257"], allowed: /1 to 256/ },
  "write-qps": { bad: ["-1", "", "abc", "Infinity", "NaN", "1e3", "100001"], allowed: /0 \(no limit\) to 100000/ },
  "write-burst": { bad: ["0", "1.5", "-3", "", "100001"], allowed: /1 to 100000/ },
  "busy-write-percent": { bad: ["0", "101", "2.5", "", "25%"], allowed: /1 to 100/ },
  "max-concurrent-starts": { bad: ["0", "1.5", "", "257"], allowed: /1 to 256/ },
  "actor-max-old-space-mb": { bad: ["15", "96.5", "96MB", "", "65537"], allowed: /16 to 65536/ },
  "max-threads": { bad: ["-1", "1.5", "", "1025", "Auto"], allowed: /0 \(one per cluster\) to 1024, or auto/ },
  "packed-thread-max-old-space-mb": { bad: ["15", "1.5", "", "65537", "Auto"], allowed: /16 to 65536, or auto/ },
  shards: { bad: ["0", "-1", "2.5", "", "1025"], allowed: /1 \(not sharded\) to 1024/ },
  "expected-replicas": { bad: ["-1", "2.5", "", "three", "1025"], allowed: /0 \(unknown\) to 1024/ },
  "admin-addr": { bad: [":65536", ":99999", "127.0.0.1:-1", "127.0.0.1", ":http"], allowed: /port 0 to 65535/ },
  "leader-election-lease-duration": { bad: ["0", "500ms", "25h", "soon"], allowed: /1s to 24h/ },
  "leader-election-renew-deadline": { bad: ["0", "50ms", "25h"], allowed: /100ms to 24h/ },
  "leader-election-retry-period": { bad: ["0", "0ms", "50ms", "25h"], allowed: /100ms to 24h/ },
  "gateway-max-addresses": { bad: ["0", "1.5", "", "1001"], allowed: /1 to 1000/ },
  "gateway-max-probed": { bad: ["0", "-1", "", "10001"], allowed: /1 to 10000/ },
  "gateway-max-probes-in-flight": { bad: ["0", "2.5", "", "10001"], allowed: /1 to 10000/ },
  "max-response-mb": { bad: ["0", "64MiB", "1.5", "", "4097"], allowed: /1 to 4096/ },
  "max-mirrors-per-cluster": { bad: ["-1", "2.5", "", "1000001"], allowed: /0 \(no limit\) to 1000000/ },
  "max-hosts-per-headless-service": { bad: ["0", "1001", "", "ten"], allowed: /1 to 1000/ },
  "max-namespaces-per-cluster": { bad: ["-1", "", "100001"], allowed: /0 \(no limit\) to 100000/ },
};

function refusal(flag: string, value: string): ConfigError {
  try {
    parseRunConfig([`--${flag}=${value}`], {});
  } catch (error) {
    assert.ok(error instanceof ConfigError, `--${flag} ${JSON.stringify(value)}: ${String(error)}`);
    return error;
  }
  assert.fail(`--${flag} ${JSON.stringify(value)} was accepted`);
}

describe("--cluster-name (SPEC §16)", () => {
  it("defaults to local and refuses a name that is not a DNS-1123 label, naming the flag", () => {
    assert.equal(defaultConfig().clusterName, "local");
    assert.throws(
      () => parseRunConfig(["--cluster-name", "Bad_Name"], {}),
      /--cluster-name: "Bad_Name" is not a DNS-1123 label/,
    );
  });
});

describe("--links (SPEC §15)", () => {
  it("is off unless given, takes a namespace name, and refuses anything else, naming the flag", () => {
    assert.equal(defaultConfig().linksNamespace, undefined);
    const config = parseRunConfig(["--links", "linkerd-multicluster"], {});
    assert.ok(config !== "help");
    assert.equal(config.linksNamespace, "linkerd-multicluster");
    assert.throws(() => parseRunConfig(["--links", "Bad_NS"], {}), /--links: "Bad_NS" is not a namespace name/);
  });
});

describe("run's numeric flags", () => {
  it("covers every numeric flag of run in the table of bad values", () => {
    const numeric = Object.entries(runFlags)
      .filter(([name, f]) => f.type === "string" && !NOT_NUMERIC.has(name))
      .map(([name]) => name)
      .sort();
    assert.deepEqual(Object.keys(BAD_VALUES).sort(), numeric);
  });

  for (const [flag, { bad, allowed }] of Object.entries(BAD_VALUES)) {
    it(`refuses bad --${flag} values at start-up, naming the flag, the value and the allowed range`, () => {
      for (const value of bad) {
        const { message } = refusal(flag, value);
        assert.ok(message.startsWith(`--${flag}: `), message);
        assert.ok(message.includes(JSON.stringify(value)), `${message} (value ${JSON.stringify(value)})`);
        assert.match(message, allowed);
      }
    });
  }

  it("accepts the defaults and values at both ends of each range", () => {
    assert.notEqual(parseRunConfig([], {}), "help");
    const good: [string, string][] = [
      ["write-concurrency", "1"],
      ["write-concurrency", "256"],
      ["write-qps", "0"],
      ["write-qps", "2.5"],
      ["write-qps", "100000"],
      ["write-burst", "1"],
      ["busy-write-percent", "1"],
      ["busy-write-percent", "100"],
      ["max-concurrent-starts", "256"],
      ["actor-max-old-space-mb", "16"],
      ["actor-max-old-space-mb", "65536"],
      ["max-threads", "0"],
      ["max-threads", "1024"],
      ["shards", "1"],
      ["expected-replicas", "0"],
      ["max-threads", "auto"],
      ["packed-thread-max-old-space-mb", "auto"],
      ["packed-thread-max-old-space-mb", "16"],
      ["blocked-recheck-period", "100ms"],
      ["blocked-recheck-period", "24h"],
      ["mcs-recheck-period", "1s"],
      ["mcs-recheck-period", "24h"],
      ["headless-host-grace", "0"],
      ["headless-host-grace", "24h"],
      ["failback-delay", "0"],
      ["failback-delay", "24h"],
      ["stale-after", "0s"],
      ["stale-after", "24h"],
      ["failover-min-ready", "1"],
      ["failover-min-ready", "100000"],
      ["local-priority", "0"],
      ["local-priority", "1000"],
      ["resync-period", "1s"],
      ["resync-period", "1.5m"],
      ["gateway-resolve-period", "24h"],
      ["admin-addr", ":0"],
      ["admin-addr", "127.0.0.1:65535"],
      ["admin-addr", ""],
      ["max-response-mb", "1"],
      ["max-mirrors-per-cluster", "0"],
      ["max-hosts-per-headless-service", "1000"],
      ["max-namespaces-per-cluster", "0"],
    ];
    for (const [flag, value] of good) {
      assert.doesNotThrow(() => parseRunConfig([`--${flag}`, value], {}), `--${flag} ${value}`);
    }
    const config = parseRunConfig(
      ["--write-concurrency", "3", "--write-qps", "2.5", "--blocked-recheck-period", "250ms"],
      {},
    );
    assert.ok(config !== "help");
    // The default: a remote without the MCS API is checked again every 5 min (SPEC §12).
    assert.equal(config.mcsRecheckMs, 300_000);
    // The limits' defaults (docs/CLI.md, "Limits").
    assert.deepEqual(
      [
        config.maxResponseMb,
        config.maxMirrorsPerCluster,
        config.maxHostsPerHeadlessService,
        config.maxNamespacesPerCluster,
      ],
      [64, 2000, 1000, 100],
    );
    const mcs = parseRunConfig(["--mcs-recheck-period", "90s"], {});
    assert.ok(mcs !== "help");
    assert.equal(mcs.mcsRecheckMs, 90_000);
    // The default: a host missing from a headless Service's slices keeps its mirror 5 min (SPEC §12).
    assert.equal(config.headlessHostGraceMs, 300_000);
    // The partition policy is off unless asked for (SPEC §14).
    assert.equal(config.staleAfterMs, 0);
    assert.equal(config.writeConcurrency, 3);
    assert.equal(config.writeQps, 2.5);
    assert.equal(config.blockedRecheckMs, 250);
  });

  it("makes `fleet-mirror run` exit 2 with the message before connecting to anything", () => {
    const main = new URL("../../src/main.ts", import.meta.url).pathname;
    const result = spawnSync(process.execPath, [main, "run", "--write-concurrency", "2.5"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(result.status, 2, result.stderr);
    assert.match(result.stderr, /^fleet-mirror run: --write-concurrency: "2\.5" /);
    assert.match(result.stderr, /1 to 256/);
  });
});

describe("--max-threads", () => {
  it("defaults to auto (the default placement); 0 and N stay numbers, as before", () => {
    const parse = (argv: string[]) => {
      const config = parseRunConfig(argv, {});
      assert.ok(config !== "help");
      return config.maxThreads;
    };
    assert.equal(parse([]), "auto");
    assert.equal(parse(["--max-threads", "auto"]), "auto");
    assert.equal(parse(["--max-threads", "0"]), 0);
    assert.equal(parse(["--max-threads", "8"]), 8);
  });
});

describe("--packed-thread-max-old-space-mb", () => {
  it("defaults to auto (sized from the memory limit); a number is MB", () => {
    const parse = (argv: string[]) => {
      const config = parseRunConfig(argv, {});
      assert.ok(config !== "help");
      return config.packedThreadMaxOldGenerationMb;
    };
    assert.equal(parse([]), "auto");
    assert.equal(parse(["--packed-thread-max-old-space-mb", "512"]), 512);
  });
});

describe("--endpoints-api", () => {
  it("accepts endpointslices, endpoints and both", () => {
    for (const mode of ["endpointslices", "endpoints", "both"] as const) {
      const config = parseRunConfig(["--endpoints-api", mode], {});
      assert.ok(config !== "help");
      assert.equal(config.endpointsApi, mode);
    }
  });

  it("refuses any other value at start-up, naming the flag, the value and the choices", () => {
    for (const value of ["", "EndpointSlices", "slices", "endpoints,endpointslices"]) {
      assert.throws(
        () => parseRunConfig(["--endpoints-api", value], {}),
        (error: Error) =>
          error.message.startsWith(`--endpoints-api: ${JSON.stringify(value)} `) &&
          error.message.includes("endpointslices, endpoints, both"),
      );
    }
  });

  it("is shown in run --help with its choices and default", () => {
    assert.match(
      flagsHelp(runFlags),
      /--endpoints-api <value>\s+.*endpointslices\|endpoints\|both.*\(default endpointslices/,
    );
  });
});

describe("--federated-selector", () => {
  it("defaults to mirror.linkerd.io/federated=member and accepts another key=value", () => {
    const defaults = parseRunConfig([], {});
    assert.ok(defaults !== "help");
    assert.deepEqual(defaults.federatedSelector, { key: "mirror.linkerd.io/federated", value: "member" });
    const other = parseRunConfig(["--federated-selector", "example.com/fleet=yes"], {});
    assert.ok(other !== "help");
    assert.deepEqual(other.federatedSelector, { key: "example.com/fleet", value: "yes" });
  });

  it("refuses anything but one key=value requirement at start-up, naming the flag and the value", () => {
    for (const value of ["", "fleet", "fleet!=no", "fleet in (a,b)", "a=b,c=d", "bad key=x"]) {
      assert.throws(
        () => parseRunConfig(["--federated-selector", value], {}),
        (error: Error) => error.message.startsWith(`--federated-selector: ${JSON.stringify(value)}: `),
        value,
      );
    }
  });
});

describe("--export-selector", () => {
  it("defaults to mirror.linkerd.io/exported=true, accepts another key=value, and is off when empty", () => {
    const defaults = parseRunConfig([], {});
    assert.ok(defaults !== "help");
    assert.deepEqual(defaults.exportSelector, { key: "mirror.linkerd.io/exported", value: "true" });
    const other = parseRunConfig(["--export-selector", "example.com/export=yes"], {});
    assert.ok(other !== "help");
    assert.deepEqual(other.exportSelector, { key: "example.com/export", value: "yes" });
    const off = parseRunConfig(["--export-selector="], {});
    assert.ok(off !== "help");
    assert.equal(off.exportSelector, undefined);
  });

  it("refuses anything but one key=value requirement at start-up, naming the flag and the value", () => {
    for (const value of ["exported", "a!=b", "a in (b)", "a=b,c=d", "bad key=x"]) {
      assert.throws(
        () => parseRunConfig(["--export-selector", value], {}),
        (error: Error) => error.message.startsWith(`--export-selector: ${JSON.stringify(value)}: `),
        value,
      );
    }
  });
});

describe("--shards", () => {
  it("defaults to 1 (not sharded) and takes S > 1 with --leader-elect", () => {
    const plain = parseRunConfig([], {});
    assert.ok(plain !== "help" && plain.shards === 1);
    const sharded = parseRunConfig(["--leader-elect", "--shards", "6"], {});
    assert.ok(sharded !== "help" && sharded.shards === 6);
  });

  it("refuses S > 1 without --leader-elect, naming both flags", () => {
    assert.throws(() => parseRunConfig(["--shards", "6"], {}), /--shards 6: needs --leader-elect/);
    assert.throws(
      () => parseRunConfig(["--leader-elect", "--expected-replicas", "3"], {}),
      /--expected-replicas 3: only applies with --shards/,
    );
    const sharded = parseRunConfig(["--leader-elect", "--shards", "6", "--expected-replicas", "3"], {});
    assert.ok(sharded !== "help");
    assert.equal(sharded.expectedReplicas, 3);
  });
});

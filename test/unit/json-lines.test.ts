/**
 * The actor threads' logger (src/log/json-lines.ts) writes pino's bytes: each case logs
 * the same call through pino, made as src/log.ts makes a logger, and through
 * JsonLineLogger, both at one fixed time, and compares the lines.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import { JsonLineLogger, type LineLogger } from "../../src/log/json-lines.ts";
import { serializeError } from "../../src/protocol/errors.ts";

const TIME = 1_764_800_000_123;
const BASE = { pid: 4242, actor: "remote-cluster" };

/** Both loggers at `level` with `BASE`, each collecting its lines. */
function pair(level: string): { lines: () => [string[], string[]]; loggers: [LineLogger, LineLogger] } {
  const fromPino: string[] = [];
  const fromOurs: string[] = [];
  const reference = pino(
    { level, base: BASE, timestamp: () => `,"time":${TIME}` },
    { write: (line: string) => fromPino.push(line) },
  );
  const ours = new JsonLineLogger(level, BASE, { write: (line) => fromOurs.push(line), now: () => TIME });
  return { lines: () => [fromPino, fromOurs], loggers: [reference, ours] };
}

/** Makes the same calls on both (through a child with cluster and epoch, as the actors do) and compares. */
function same(level: string, calls: (log: LineLogger) => void): string[] {
  const { lines, loggers } = pair(level);
  for (const logger of loggers) calls(logger.child({ cluster: "east", epoch: 3 }));
  const [expected, actual] = lines();
  assert.deepEqual(actual, expected);
  return actual;
}

function failure(): Error {
  const cause = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
  return new Error("listing services failed", { cause });
}

describe("JSON-line logger", () => {
  it("writes pino's line for fields and a message at each level", () => {
    const lines = same("trace", (log) => {
      log.trace({ a: 1 }, "trace");
      log.debug({ seq: 7 }, "the local writer asked for the complete desired set again");
      log.info({ state: "synced" }, "cluster east is synced");
      log.warn({ gateway: "gw/ns", problems: ["refused", "timeout"] }, "gateway gw/ns: refused; timeout");
      log.error({ remote: "ns/svc", reason: "TooManyPorts" }, "mirror not made: too many ports");
      log.fatal({}, "fatal");
    });
    assert.equal(lines.length, 6);
    assert.match(
      lines[2] ?? "",
      /^\{"level":30,"time":1764800000123,"pid":4242,"actor":"remote-cluster","cluster":"east","epoch":3,"state":"synced","msg":"cluster east is synced"\}\n$/,
    );
  });

  it("writes nothing below its level, and nothing at all when silent", () => {
    assert.equal(
      same("warn", (log) => {
        log.info({ a: 1 }, "no");
        log.warn({ a: 1 }, "yes");
      }).length,
      1,
    );
    assert.equal(same("silent", (log) => log.fatal({}, "no")).length, 0);
  });

  it("writes an err field as pino's error serializer does, causes and all", () => {
    same("info", (log) => {
      log.error({ err: serializeError(failure(), "list") }, "malformed message from the local writer; ignored");
      log.warn({ hostname: "gw.example", err: serializeError("not an Error") }, "does not resolve");
      log.warn({ err: serializeError(new Error("no stack", { cause: "a string cause" })) }, "x");
      log.warn({ err: failure() }, "an Error itself");
      log.warn({ err: { code: 7 } }, "not error-like: as it is");
    });
  });

  it("escapes strings as pino does: quotes, backslashes, control characters, long and non-ASCII text", () => {
    same("info", (log) => {
      log.info({ path: 'C:\\dir "quoted"' }, 'a "quoted" \\ message');
      log.info({ text: "line\nbreak\ttab\u0001" }, "control \u0007 character");
      log.info({ long: 'x"'.repeat(80) }, `${"long message ".repeat(10)}"end"`);
      log.info({ 'odd key"': "é ü 東京 🚀" }, "ünïcödé 🚀");
      log.info({ nested: { a: [1, "two", { three: null }] }, when: new Date(TIME) }, "objects");
    });
  });

  it("leaves out undefined and function fields, writes non-finite numbers as null, and omits a missing message", () => {
    same("info", (log) => {
      log.info({ gone: undefined, fn: () => 1, nan: Number.NaN, inf: Number.POSITIVE_INFINITY, ok: true });
      log.info({}, "");
    });
  });

  it("keeps the bindings of every ancestor in order, after the base", () => {
    const { lines, loggers } = pair("info");
    for (const logger of loggers)
      logger.child({ cluster: "west", skipped: undefined }).child({ epoch: 9 }).info({ n: 1 }, "m");
    const [expected, actual] = lines();
    assert.deepEqual(actual, expected);
  });

  it("refuses an unknown level", () => {
    assert.throws(
      () => new JsonLineLogger("verbose", {}, { write: () => {}, now: Date.now }),
      /unknown log level "verbose"/,
    );
  });
});

/**
 * The Grafana dashboard of deploy/monitoring: every panel query, its template variables
 * replaced by values Grafana could give them, parses in promtool (each becomes a recording
 * rule of a temporary rules file for `promtool check rules`), and names only metrics the
 * controller exports.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { exportedMetricNames } from "../helpers/every-metric.ts";
import { metricNames, promtool, promtoolBuiltFirst } from "../helpers/promtool.ts";

const DASHBOARD = resolve(import.meta.dirname, "..", "..", "deploy", "monitoring", "fleet-mirror-dashboard.json");

interface Panel {
  readonly title: string;
  readonly type: string;
  readonly targets?: readonly { readonly expr: string }[];
  readonly panels?: readonly Panel[];
}
interface Dashboard {
  readonly panels: readonly Panel[];
  readonly templating: { readonly list: readonly { readonly name: string; readonly allValue?: string }[] };
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as Dashboard;
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const queries = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

/** Values Grafana substitutes: a variable's "All" value, and the rate interval. */
const SUBSTITUTES: Readonly<Record<string, string>> = {
  __rate_interval: "5m",
  __interval: "1m",
  __range: "6h",
  ...Object.fromEntries(dashboard.templating.list.flatMap((v) => (v.allValue ? [[v.name, v.allValue]] : []))),
};

/** The query as Grafana sends it: `$name` and `${name}` replaced; an unknown variable fails. */
function substitute(expr: string): string {
  return expr.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, braced: string | undefined, plain: string | undefined) => {
    const name = braced ?? plain ?? "";
    const value = SUBSTITUTES[name];
    if (value === undefined) throw new Error(`unknown template variable $${name} in ${expr}`);
    return value;
  });
}

describe("the Grafana dashboard of deploy/monitoring", () => {
  promtoolBuiltFirst();
  const dir = mkdtempSync(join(tmpdir(), "fleet-mirror-dashboard-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("covers the fleet, each cluster, the writer, latency, gateways, failover and memory per thread", () => {
    const rows = dashboard.panels.filter((p) => p.type === "row").map((p) => p.title);
    for (const topic of [/fleet/i, /cluster/i, /writer/i, /latency/i, /gateway/i, /failover/i, /memory/i])
      assert.ok(
        rows.some((r) => topic.test(r)),
        `no row about ${topic}`,
      );
    assert.ok(queries.length >= 30, `${queries.length} queries`);
    assert.ok(queries.some((q) => q.expr.includes("fleet_mirror_thread_heap_used_bytes") && /thread/.test(q.panel)));
    // The failover panels: serving priority per fleet-wide Service, and switches over time.
    assert.ok(
      queries.some((q) => q.expr.includes("fleet_mirror_federated_serving_priority") && /priority/i.test(q.panel)),
    );
    assert.ok(queries.some((q) => q.expr.includes("fleet_mirror_federated_switches_total") && /switch/i.test(q.panel)));
  });

  it("has queries that all parse in promtool once Grafana's variables are substituted", async () => {
    const file = join(dir, "dashboard-queries.rules.json");
    const rules = queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: substitute(q.expr) }));
    writeFileSync(file, JSON.stringify({ groups: [{ name: "dashboard", rules }] }));
    const result = await promtool(["check", "rules", file]);
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, new RegExp(`SUCCESS: ${queries.length} rules found`));
  });

  it("names only metrics the controller exports", async () => {
    const exported = await exportedMetricNames();
    for (const { panel, expr } of queries) {
      const names = metricNames(expr);
      assert.ok(names.size > 0, `${panel}: ${expr} names no metric`);
      for (const name of names) assert.ok(exported.has(name), `${panel}: ${name} is not exported`);
    }
  });
});

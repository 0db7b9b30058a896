/**
 * The alert rules of deploy/monitoring: promtool parses them (the rules file and the
 * PrometheusRule's spec), every alert fires when it should and stays quiet when it should
 * not (`promtool test rules` on test/fixtures/alert-rules.promtool.yaml), the PrometheusRule
 * is the rules file rendered, and every metric the rules read is one the controller exports.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { load } from "js-yaml";
import {
  CHART_RULES_FILE,
  PROMETHEUS_RULE_FILE,
  RULES_FILE,
  renderPrometheusRule,
} from "../../scripts/monitoring/render-prometheusrule.ts";
import { exportedMetricNames } from "../helpers/every-metric.ts";
import { metricNames, promtool, promtoolBuiltFirst } from "../helpers/promtool.ts";

const RULE_TESTS = resolve(import.meta.dirname, "..", "fixtures", "alert-rules.promtool.yaml");

interface Rule {
  readonly alert: string;
  readonly expr: string;
}
interface RuleTests {
  readonly tests: readonly {
    readonly alert_rule_test: readonly { readonly alertname: string; readonly exp_alerts: readonly unknown[] }[];
  }[];
}

const rulesText = readFileSync(RULES_FILE, "utf8");
const rules = (load(rulesText) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

describe("the alert rules of deploy/monitoring", () => {
  promtoolBuiltFirst();
  const dir = mkdtempSync(join(tmpdir(), "fleet-mirror-alerts-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("pass promtool check rules, as a rules file and as the PrometheusRule's spec", async () => {
    const plain = await promtool(["check", "rules", RULES_FILE]);
    assert.equal(plain.code, 0, plain.output);
    assert.match(plain.output, new RegExp(`SUCCESS: ${rules.length} rules found`));
    const spec = join(dir, "spec.yaml");
    const object = load(readFileSync(PROMETHEUS_RULE_FILE, "utf8")) as { kind: string; spec: unknown };
    assert.equal(object.kind, "PrometheusRule");
    writeFileSync(spec, JSON.stringify(object.spec));
    const operator = await promtool(["check", "rules", spec]);
    assert.equal(operator.code, 0, operator.output);
  });

  it("keep the PrometheusRule in step: it is the rules file rendered, group for group", () => {
    const committed = readFileSync(PROMETHEUS_RULE_FILE, "utf8");
    assert.equal(
      committed,
      renderPrometheusRule(rulesText),
      "deploy/monitoring/prometheusrule.yaml is out of date: run node scripts/monitoring/render-prometheusrule.ts",
    );
    assert.deepEqual((load(committed) as { spec: unknown }).spec, load(rulesText));
  });

  it("keep the Helm chart's copy in step: byte for byte the rules file", () => {
    assert.equal(
      readFileSync(CHART_RULES_FILE, "utf8"),
      rulesText,
      "charts/fleet-mirror/files/fleet-mirror.rules.yaml is out of date: run node scripts/monitoring/render-prometheusrule.ts",
    );
  });

  it("fire when they should and stay quiet when they should not (promtool test rules)", async () => {
    const result = await promtool(["test", "rules", RULE_TESTS]);
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, /SUCCESS/);
  });

  it("each have a firing case and a quiet case in the rule tests", () => {
    const cases = (load(readFileSync(RULE_TESTS, "utf8")) as RuleTests).tests.flatMap((t) => t.alert_rule_test);
    for (const { alert } of rules) {
      const mine = cases.filter((c) => c.alertname === alert);
      assert.ok(
        mine.some((c) => c.exp_alerts.length > 0),
        `${alert} has no case in which it fires`,
      );
      assert.ok(
        mine.some((c) => c.exp_alerts.length === 0),
        `${alert} has no case in which it stays quiet`,
      );
    }
  });

  it("read only metrics the controller exports", async () => {
    const exported = await exportedMetricNames();
    for (const { alert, expr } of rules)
      for (const name of metricNames(expr))
        assert.ok(exported.has(name), `${alert} reads ${name}, which is not exported`);
  });
});

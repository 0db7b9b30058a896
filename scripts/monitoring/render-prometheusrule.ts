/**
 * Renders deploy/monitoring/prometheusrule.yaml from deploy/monitoring/fleet-mirror.rules.yaml:
 * the same groups, text for text, as the spec of a PrometheusRule (monitoring.coreos.com/v1),
 * and copies the rules file into the Helm chart (charts/fleet-mirror/files/), whose
 * PrometheusRule template includes it. The rules file is the one source of truth; the
 * monitoring test fails when the committed PrometheusRule or the chart's copy is not what
 * this writes.
 *
 *   node scripts/monitoring/render-prometheusrule.ts          rewrites the PrometheusRule
 *   node scripts/monitoring/render-prometheusrule.ts --check  exits 1 when it is out of date
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const monitoringDir = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "deploy", "monitoring");
export const RULES_FILE = join(monitoringDir, "fleet-mirror.rules.yaml");
export const PROMETHEUS_RULE_FILE = join(monitoringDir, "prometheusrule.yaml");
/** The Helm chart's copy of the rules file, which its PrometheusRule template includes (a chart reads only its own files). */
export const CHART_RULES_FILE = resolve(
  monitoringDir,
  "..",
  "..",
  "charts",
  "fleet-mirror",
  "files",
  "fleet-mirror.rules.yaml",
);

const HEADER = `# GENERATED from fleet-mirror.rules.yaml by scripts/monitoring/render-prometheusrule.ts:
# edit the rules file and rerun the script. For the Prometheus Operator; its Prometheus
# must select this object (ruleSelector, ruleNamespaceSelector): see docs/DEPLOY.md.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: fleet-mirror
  namespace: fleet-mirror
  labels:
    app.kubernetes.io/name: fleet-mirror
    app.kubernetes.io/part-of: fleet-mirror
spec:
`;

/** The PrometheusRule text for a rules file's text: its leading comment dropped, the rest indented under `spec:`. */
export function renderPrometheusRule(rulesText: string): string {
  const lines = rulesText.split("\n");
  const body = lines.slice(lines.findIndex((l) => l !== "" && !l.startsWith("#")));
  return HEADER + body.map((l) => (l === "" ? l : `  ${l}`)).join("\n");
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const rules = readFileSync(RULES_FILE, "utf8");
  const outputs: readonly (readonly [string, string])[] = [
    [PROMETHEUS_RULE_FILE, renderPrometheusRule(rules)],
    [CHART_RULES_FILE, rules],
  ];
  if (process.argv.includes("--check")) {
    const stale = outputs.filter(([file, text]) => readFileSync(file, "utf8") !== text).map(([file]) => file);
    for (const file of stale) {
      process.stderr.write(`${file} is out of date: run node scripts/monitoring/render-prometheusrule.ts\n`);
    }
    if (stale.length > 0) process.exit(1);
  } else for (const [file, text] of outputs) writeFileSync(file, text);
}

/**
 * Renders deploy/monitoring/prometheusrule.yaml from deploy/monitoring/fleet-mirror.rules.yaml:
 * the same groups, text for text, as the spec of a PrometheusRule (monitoring.coreos.com/v1).
 * The rules file is the one source of truth; the monitoring test fails when the committed
 * PrometheusRule is not what this renders.
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
  const rendered = renderPrometheusRule(readFileSync(RULES_FILE, "utf8"));
  if (process.argv.includes("--check")) {
    if (readFileSync(PROMETHEUS_RULE_FILE, "utf8") !== rendered) {
      process.stderr.write(
        `${PROMETHEUS_RULE_FILE} is out of date: run node scripts/monitoring/render-prometheusrule.ts\n`,
      );
      process.exit(1);
    }
  } else writeFileSync(PROMETHEUS_RULE_FILE, rendered);
}

/**
 * The restated MCS conformance specs' fixtures and report (test/integration/mcs-conformance.test.ts,
 * SPEC §16): the suite's `hello` Service, and its report.yaml's shape.
 */
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dump } from "js-yaml";

export const KEP =
  "https://github.com/kubernetes/enhancements/tree/master/keps/sig-multicluster/1645-multi-cluster-services-api";
export const HELLO = "hello";

/** One spec's entry, as the suite's report.yaml has it. */
export interface SpecResult {
  Desc: string;
  Ref: string;
  Labels: string[];
  Passed: boolean;
  Failed: boolean;
  Skipped: boolean;
  Conformant: boolean;
  Message: string;
}

/** The suite's `hello` Service: two ports of one number, ClientIP affinity with a timeout, dual stack preferred. */
export function helloService(fields: Record<string, unknown> = {}): object {
  return {
    metadata: { name: HELLO, labels: { "dummy-svc": "dummy" }, annotations: { "dummy-svc": "dummy" } },
    spec: {
      selector: { app: HELLO },
      ports: [
        { name: "tcp", port: 42, protocol: "TCP" },
        { name: "udp", port: 42, protocol: "UDP" },
      ],
      sessionAffinity: "ClientIP",
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 10 } },
      ipFamilyPolicy: "PreferDualStack",
      ...fields,
    },
  };
}

/** Writes the report where MCS_CONFORMANCE_REPORT says (the committed one: test/conformance/mcs/report.yaml), else to a temporary file. */
export function writeReport(required: readonly SpecResult[], optional: readonly SpecResult[] = []): void {
  const results = [...required, ...optional];
  const report = {
    Runner:
      "fleet-mirror's restatement of the Required specs and the Optional EndpointSlice spec of sigs.k8s.io/mcs-api conformance (test/integration/mcs-conformance.test.ts), their Pods on KWOK Nodes: the suite's Go module is not served by the module proxy this project reaches",
    Groups: [
      { Name: "Required", Tests: required },
      ...(optional.length > 0 ? [{ Name: "Optional", Tests: optional }] : []),
    ],
    SuiteFailure: "",
    DNSDomain: "clusterset.local",
    Passed: results.filter((r) => r.Passed).length,
    Total: results.length,
    Implementation: { Organization: "", Project: "fleet-mirror", Version: "0.1.0", URL: "" },
  };
  const path = process.env["MCS_CONFORMANCE_REPORT"] ?? join(tmpdir(), `fleet-mirror-mcs-report-${process.pid}.yaml`);
  writeFileSync(path, dump(report, { lineWidth: 120 }));
}

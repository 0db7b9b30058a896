/**
 * `Warning` headers of a real kube-apiserver (v1 Endpoints are deprecated): the lean
 * client logs each distinct text once and counts every one, and the local writer, which
 * writes Endpoints, carries its count in its status and the metric.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { KubeClient } from "../../src/kube/client.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { adminConnection } from "../helpers/connection.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { supervisorMetrics } from "../helpers/metrics.ts";

describe("API warnings from a real API server", () => {
  let fleet: Fleet;
  let controller: Supervisor | undefined;

  before(async () => {
    fleet = await Fleet.start(["east"]);
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("logs the v1 Endpoints deprecation warning once per client and counts it on every Endpoints request", async () => {
    const logged: { warning: unknown; message: string }[] = [];
    const client = new KubeClient(adminConnection(fleet.plane.cluster("local")), {
      logger: { warn: (fields, message) => logged.push({ warning: fields["warning"], message }) },
    });
    try {
      await client.request("POST", "/api/v1/namespaces", { body: { metadata: { name: "warned" } } });
      assert.equal(client.apiWarnings.total, 0, "no warning for namespaces");
      await client.request("POST", "/api/v1/namespaces/warned/endpoints", { body: { metadata: { name: "ep" } } });
      await client.request("GET", "/api/v1/namespaces/warned/endpoints/ep");
      await client.request("GET", "/api/v1/namespaces/warned/endpoints");
      const { total, byText } = client.apiWarnings;
      assert.equal(total, 3);
      const [text, ...others] = Object.keys(byText);
      assert.deepEqual(others, []);
      assert.match(text ?? "", /v1 Endpoints is deprecated/);
      assert.match(text ?? "", /EndpointSlice/);
      assert.deepEqual(logged, [{ warning: text, message: `API server warning: ${text}` }]);
    } finally {
      client.close();
    }
  });

  it("carries the writer's warnings into its status and fleet_mirror_api_warnings_total", async () => {
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.50" }] });
    await fleet.register("east");
    const running = fleet.startInProcess();
    controller = running;
    await fleet.createService("east", "warn-ns", "web");
    await fleet.waitForEndpoints("warn-ns", "web-east", (e) => (e.subsets?.length ?? 0) > 0);
    const warnings = await eventually("the writer's status to count a warning", () => {
      const n = running.status().writer?.apiWarnings ?? 0;
      return n > 0 ? n : undefined;
    });
    assert.ok(warnings >= 1);
    const text = await supervisorMetrics(running);
    const local = /^fleet_mirror_api_warnings_total\{api="local",cluster=""\} (\d+)$/m.exec(text);
    assert.ok(
      local && Number(local[1]) >= 1,
      text
        .split("\n")
        .filter((l) => l.includes("api_warnings"))
        .join("\n"),
    );
    assert.match(text, /^fleet_mirror_api_warnings_total\{api="remote",cluster="east"\} 0$/m);
  });
});

/**
 * The pure part of `run --dry-run`: planned writes → the plan per key → the report
 * (totals, sorted writes, bound), the metric series and the status section made of it;
 * and the flag's refusal next to --leader-elect.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { plannedWriteSeries } from "../../src/admin/snapshot-series.ts";
import { dryRunViewFromAdmin, formatDryRun } from "../../src/cli/dry-run-rows.ts";
import { parseRunConfig } from "../../src/config.ts";
import { DryRunPlan, dryRunReport, type PlannedWrite, plannedWrite } from "../../src/core/dry-run.ts";
import type { WriteAction } from "../../src/core/mirror-kinds.ts";
import { ConfigError } from "../../src/flag-values.ts";
import type { WriterStatus } from "../../src/protocol/messages.ts";
import type { FleetStatus } from "../../src/status/fleet-view.ts";

const createService: WriteAction = { verb: "create", kind: "Service", namespace: "shop", name: "web-east", body: {} };
const createEndpoints: WriteAction = { ...createService, kind: "Endpoints" };
const createNamespace: WriteAction = { verb: "create", kind: "Namespace", name: "shop", body: {} };
const updateImportStatus: WriteAction = {
  verb: "update",
  kind: "ServiceImport",
  namespace: "shop",
  name: "web",
  body: {},
  subresource: "status",
};
const deleteService: WriteAction = {
  verb: "delete",
  kind: "Service",
  namespace: "shop",
  name: "old-west",
  uid: "u1",
  cluster: "west",
};

describe("dry run: planned writes", () => {
  it("names a write by verb, resource (with a status subresource), object, key and cluster", () => {
    assert.deepEqual(plannedWrite("shop/web-east", createService, "east"), {
      verb: "create",
      kind: "Service",
      object: "shop/web-east",
      key: "shop/web-east",
      cluster: "east",
    });
    assert.equal(plannedWrite("shop/web", updateImportStatus, "").kind, "ServiceImport/status");
    assert.equal(plannedWrite("shop/web-east", createNamespace, "east").object, "shop");
  });

  it("keeps each key's latest plan only: a write gone from the plan leaves the report (level-triggered)", () => {
    const plan = new DryRunPlan();
    plan.begin("shop/web-east");
    plan.add(plannedWrite("shop/web-east", createService, "east"));
    plan.add(plannedWrite("shop/web-east", createEndpoints, "east"));
    plan.add(plannedWrite("shop/web-east", createService, "east")); // a second pass plans it again
    const first = plan.end("shop/web-east");
    assert.deepEqual(
      first.added.map((w) => w.kind),
      ["Service", "Endpoints"],
    );
    assert.deepEqual(first.gone, []);
    assert.deepEqual(plan.report().totals, { "create/Service": 1, "create/Endpoints": 1 });

    // The Service appeared (made by someone else): only the Endpoints are still planned.
    plan.begin("shop/web-east");
    plan.add(plannedWrite("shop/web-east", createEndpoints, "east"));
    const second = plan.end("shop/web-east");
    assert.deepEqual(second.added, []);
    assert.deepEqual(
      second.gone.map((w) => w.kind),
      ["Service"],
    );
    assert.deepEqual(plan.report().totals, { "create/Endpoints": 1 });

    // Everything matches: the key leaves the plan.
    plan.begin("shop/web-east");
    assert.equal(plan.end("shop/web-east").gone.length, 1);
    assert.deepEqual(plan.report(), { totals: {}, planned: [], omitted: 0 });
  });

  it("reports in key order, counts a write several keys plan once, and bounds the list but not the totals", () => {
    const writes: PlannedWrite[] = [
      plannedWrite("shop/web-east", createService, "east"),
      plannedWrite("shop/web-east", createNamespace, "east"),
      plannedWrite("shop/cart-east", createNamespace, "east"),
      plannedWrite("shop/old-west", deleteService, "west"),
    ];
    const report = dryRunReport(writes, 2);
    assert.deepEqual(report.totals, { "create/Namespace": 1, "create/Service": 1, "delete/Service": 1 });
    assert.deepEqual(
      report.planned.map((w) => `${w.key} ${w.verb} ${w.kind}`),
      ["shop/cart-east create Namespace", "shop/old-west delete Service"],
    );
    assert.equal(report.omitted, 1);
  });
});

describe("dry run: metric series and status section", () => {
  const dryRun: NonNullable<WriterStatus["dryRun"]> = dryRunReport([
    plannedWrite("shop/web-east", createService, "east"),
    plannedWrite("shop/web-east", createEndpoints, "east"),
    plannedWrite("shop/web", updateImportStatus, ""),
    plannedWrite("shop/old-west", deleteService, "west"),
  ]);
  const writer = {
    ready: true,
    queueDepth: 0,
    inFlight: 0,
    writes: {},
    retries: 0,
    writeDuration: { buckets: [], sum: 0, count: 0 },
    clusters: {
      east: {
        mirrors: 2,
        complete: true,
        blocked: [{ key: "shop/taken-east", reason: "user-owned", message: "Service shop/taken-east exists" }],
      },
    },
    dryRun,
  } satisfies WriterStatus;

  it("one gauge series per verb and resource, named as in fleet_mirror_writes_total; none outside a dry run", () => {
    const fleet: FleetStatus = { secretsListed: true, writer, writerRestarts: 0, clusters: [] };
    assert.deepEqual(
      plannedWriteSeries(fleet)
        .map((s) => `${s.labels.verb} ${s.labels.resource} ${s.value}`)
        .sort(),
      ["create endpoints 1", "create services 1", "delete services 1", "update serviceimports/status 1"],
    );
    const { dryRun: _, ...notDry } = writer;
    assert.deepEqual(plannedWriteSeries({ ...fleet, writer: notDry }), []);
  });

  it("status lists each planned write and each mirror left alone", () => {
    const view = dryRunViewFromAdmin({ leadership: { leading: true }, writer } as never);
    assert.ok(view);
    const text = formatDryRun(view);
    assert.match(text, /^DRY RUN: nothing is written\. 4 writes planned/);
    assert.match(text, /create\s+Service\s+shop\/web-east\s+east/);
    assert.match(text, /delete\s+Service\s+shop\/old-west\s+west/);
    assert.match(text, /shop\/taken-east\s+east\s+user-owned/);
    assert.equal(
      dryRunViewFromAdmin({ leadership: { leading: true }, writer: { ...writer, dryRun: undefined } } as never),
      undefined,
    );
    assert.match(formatDryRun({ totals: {}, planned: [], omitted: 0, skipped: [] }), /No write planned/);
  });
});

describe("dry run: the flag", () => {
  it("is refused with --leader-elect (a Lease is a write), naming both flags", () => {
    assert.throws(
      () => parseRunConfig(["--namespace", "x", "--dry-run", "--leader-elect"], {}),
      (error: unknown) => error instanceof ConfigError && /--dry-run.*--leader-elect/.test(error.message),
    );
    const config = parseRunConfig(["--namespace", "x", "--dry-run"], {});
    assert.ok(config !== "help" && config.dryRun);
  });
});

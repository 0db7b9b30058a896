/**
 * Entry of the probe-servers child process (see probe-servers.ts, the parent's handle):
 * one sandbox ProbeServer per address:port pair, switched by commands over IPC. A
 * command is answered once it has taken effect (every server listening, stopped or
 * switched), so the parent's clock can start right after it.
 */
import { ProbeServer } from "../sandbox/probe-server.ts";
import { serveCommands } from "./child-rpc.ts";
import type { ProbeServersCommand, ProbeServersReply } from "./probe-servers.ts";

const servers: ProbeServer[] = [];

async function handle(command: ProbeServersCommand): Promise<ProbeServersReply> {
  switch (command.op) {
    case "listen": {
      for (const pair of command.pairs) servers.push(await ProbeServer.start(pair.address, pair.port));
      return { id: command.id, ok: true };
    }
    case "mode": {
      const chosen = new Set(command.addresses);
      for (const server of servers) {
        if (!chosen.has(server.address)) continue;
        if (command.mode === "stopped") await server.stop();
        else {
          server.mode = command.mode;
          await server.restart();
        }
      }
      return { id: command.id, ok: true };
    }
    case "probed": {
      // Pairs probed at least once, and requests received in all (any path).
      let received = 0;
      for (const server of servers) received += server.received;
      return { id: command.id, ok: true, probed: servers.filter((s) => s.received > 0).length, received };
    }
    default: {
      const never: never = command;
      throw new Error(`unknown command ${JSON.stringify(never)}`);
    }
  }
}

serveCommands(handle);

/**
 * Docker for the image's tests and benchmark: the daemon (scripts/image/docker.sh, which
 * installs and starts it when missing and stops only what it started, once its last
 * holder is done), the image build (scripts/image/build.sh: the repository's Dockerfile
 * on the local stand-in for its base) and the docker CLI.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { runTool } from "./kubectl.ts";

const SCRIPTS = fileURLToPath(new URL("../../scripts/image/", import.meta.url));

/** `docker args`, which must exit 0; returns its stdout. */
export async function docker(args: readonly string[]): Promise<string> {
  const result = await runTool("docker", args);
  if (result.code !== 0) throw new Error(`docker ${args.join(" ")} exited ${result.code}:\n${result.stderr}`);
  return result.stdout;
}

/**
 * Runs a script of scripts/image/ with its stderr passed through (a build's progress shows
 * in the test's output) and returns the last line of its stdout.
 */
function runScript(script: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [`${SCRIPTS}${script}`, ...args], { stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      const last = stdout.trim().split("\n").pop() ?? "";
      if (code === 0) resolve(last);
      else reject(new Error(`scripts/image/${script} ${args.join(" ")} exited ${code}`));
    });
  });
}

/**
 * A Docker daemon for this process: installs docker.io and starts dockerd when needed
 * (root), registering this process as a holder. Rejects with the script's reason when no
 * daemon can be had: a test that needs the image fails, it is never skipped.
 */
export function acquireDocker(): Promise<string> {
  return runScript("docker.sh", ["up", String(process.pid)]);
}

/** Unregisters this process; the daemon stops if a holder started it and none is left. */
export async function releaseDocker(): Promise<void> {
  await runScript("docker.sh", ["down", String(process.pid)]);
}

/** Builds the image (base first, cached per machine) as `tag` (default: the chart's image); returns the tag. */
export function buildImage(tag?: string): Promise<string> {
  return runScript("build.sh", tag === undefined ? [] : [tag]);
}

/** The tag of the local base image (scripts/image/base.sh; imported when the daemon lacks it). */
export function baseImage(): Promise<string> {
  return runScript("base.sh", []);
}

/** An image's size in bytes, as `docker image inspect` reports it (every layer, uncompressed). */
export async function imageBytes(image: string): Promise<number> {
  return Number((await docker(["image", "inspect", "--format", "{{.Size}}", image])).trim());
}

/** The image's layers from the newest down (size in bytes, the instruction that made it). */
export async function imageLayers(image: string): Promise<{ readonly bytes: number; readonly createdBy: string }[]> {
  const out = await docker(["history", "--no-trunc", "--human=false", "--format", "{{.Size}}\t{{.CreatedBy}}", image]);
  return out
    .trim()
    .split("\n")
    .map((line) => {
      const [size = "0", ...rest] = line.split("\t");
      return { bytes: Number(size), createdBy: rest.join("\t") };
    });
}

/** Megabytes as Docker prints them (10^6 bytes), to one decimal. */
export const megabytes = (bytes: number): number => Math.round(bytes / 1e5) / 10;

// Test helpers: the real tickwheel server binary, and a TCP relay whose
// connections a test can cut.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root (this file is dist/testkit/server.js in clients/typescript). */
export const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));

let built: string | null = null;

/**
 * serverBinary returns the tickwheel binary: $TICKWHEEL_BIN (CI builds it
 * with go build -o first), else one built here once with go build.
 */
export function serverBinary(): string {
  const env = process.env.TICKWHEEL_BIN;
  if (env) {
    if (!existsSync(env)) throw new Error(`TICKWHEEL_BIN=${env} does not exist`);
    return env;
  }
  if (!built) {
    const dir = mkdtempSync(join(tmpdir(), "tickwheel-ts-"));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    built = join(dir, "tickwheel");
    execFileSync("go", ["build", "-o", built, "./cmd/tickwheel"], { cwd: repoRoot, stdio: "inherit" });
  }
  return built;
}

export const ADMIN_TOKEN = "ts-test-admin-token";

/** A running server process. */
export interface RunningServer {
  addr: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/**
 * startServer runs the binary on a free loopback port, in memory
 * (-data-dir ""), frozen at tick 1000 unless args say otherwise, with
 * ADMIN_TOKEN as its admin token (in $TICKWHEEL_ADMIN_TOKEN: the server
 * refuses -admin-token, which would show in ps) and no operator HTTP listener (its default
 * port, 7421, is a running server's, and each test server would want it).
 */
export function startServer(args: string[] = ["-frozen", "-start-tick", "1000"]): Promise<RunningServer> {
  const proc = spawn(serverBinary(), ["-addr", "127.0.0.1:0", "-data-dir", "", "-log-level", "warn", "-http-addr", "off", ...args],
    { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, TICKWHEEL_ADMIN_TOKEN: ADMIN_TOKEN } });
  return new Promise((resolve, reject) => {
    let out = "";
    const onExit = (code: number | null): void => reject(new Error(`tickwheel exited (${code}) before listening: ${out}`));
    proc.once("exit", onExit);
    proc.stdout!.on("data", (b: Buffer) => {
      out += b.toString();
      const m = /tickwheel listening on (\S+)/.exec(out);
      if (m) {
        proc.off("exit", onExit);
        proc.stdout!.removeAllListeners("data");
        proc.stdout!.resume();
        resolve({
          addr: m[1], proc,
          stop: () => new Promise<void>((r) => {
            if (proc.exitCode !== null) return r();
            proc.once("exit", () => r());
            proc.kill("SIGTERM");
          }),
        });
      }
    });
  });
}

/**
 * Relay forwards TCP connections to a target; cut() resets every connection
 * through it; while holding (holdReplies), what the server sends is dropped.
 */
export class Relay {
  private readonly server: Server;
  private readonly pairs = new Set<[Socket, Socket]>();
  private holding = false;
  addr = "";

  private constructor(private readonly target: string) {
    this.server = createServer((down) => {
      const i = this.target.lastIndexOf(":");
      const up = createConnection({ host: this.target.slice(0, i), port: Number(this.target.slice(i + 1)) });
      const pair: [Socket, Socket] = [down, up];
      this.pairs.add(pair);
      const drop = (): void => {
        this.pairs.delete(pair);
        down.destroy();
        up.destroy();
      };
      down.on("error", drop).on("close", drop);
      up.on("error", drop).on("close", drop);
      down.pipe(up);
      up.on("data", (chunk: Buffer) => {
        if (!this.holding) down.write(chunk);
      });
    });
  }

  /** holdReplies drops (on) or forwards again (off) what the server sends: a reply "lost" with a connection then cut. */
  holdReplies(on: boolean): void {
    this.holding = on;
  }

  static async start(target: string): Promise<Relay> {
    const r = new Relay(target);
    await new Promise<void>((res) => r.server.listen(0, "127.0.0.1", res));
    const a = r.server.address();
    if (a === null || typeof a === "string") throw new Error("relay: no address");
    r.addr = `127.0.0.1:${a.port}`;
    return r;
  }

  /** cut resets every connection through the relay and returns how many. */
  cut(): number {
    const n = this.pairs.size;
    for (const [down, up] of this.pairs) {
      down.resetAndDestroy();
      up.destroy();
    }
    this.pairs.clear();
    return n;
  }

  stop(): Promise<void> {
    this.cut();
    return new Promise((r) => this.server.close(() => r()));
  }
}

import type { Client, Event } from "../src/index.js";

/** Reader takes events from a client's iterator, with a deadline per read. */
export class Reader {
  private readonly it: AsyncIterator<Event>;
  private pending: Promise<IteratorResult<Event>> | null = null; // a read that outlived its deadline

  private read(): Promise<IteratorResult<Event>> {
    this.pending ??= this.it.next();
    return this.pending;
  }

  constructor(c: Client) {
    this.it = c.events();
  }

  /** take reads n events, failing after ms without one. */
  async take(n: number, ms = 5000): Promise<Event[]> {
    const out: Event[] = [];
    while (out.length < n) {
      let timer: NodeJS.Timeout | undefined;
      const r = await Promise.race([
        this.read(),
        new Promise<never>((_, rej) => {
          timer = setTimeout(() => rej(new Error(`no event after ${ms} ms (had ${out.length} of ${n})`)), ms);
        }),
      ]);
      clearTimeout(timer);
      this.pending = null;
      if (r.done) throw new Error(`events ended after ${out.length} of ${n}`);
      out.push(r.value);
    }
    return out;
  }

  /** none checks that no event comes within ms. */
  async none(ms = 100): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([
      this.read(),
      new Promise<null>((res) => {
        timer = setTimeout(() => res(null), ms);
      }),
    ]);
    clearTimeout(timer);
    if (r) this.pending = null;
    if (r && !r.done) throw new Error(`unexpected event ${JSON.stringify(r.value, (_, v) => (typeof v === "bigint" ? v.toString() : v))}`);
  }
}

/** line renders a fire event like the CLI's watch: "tick 1003  1/11  fired 1/4  data \"poison\"". */
export function line(ev: Event): string {
  if (ev.kind !== "fire") return `${ev.kind} ${ev.receiver}`;
  let s = `tick ${ev.tick}  ${ev.receiver}/${ev.tid}  fired ${ev.fired}/${ev.repeat}`;
  if (ev.data) s += `  data "${Buffer.from(ev.data).toString()}"`;
  if (ev.last) s += "  last";
  return s;
}

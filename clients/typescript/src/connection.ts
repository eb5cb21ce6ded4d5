import { Socket, createConnection, isIP } from "node:net";
import { connect as tlsConnect } from "node:tls";

import { DisconnectedError, TickwheelError } from "./errors.js";
import type { TLSOptions } from "./options.js";
import {
  FrameSplitter, NOT_LEADER, decodeMessage, encodeRequest, type Message, type Request,
} from "./protocol.js";

/** A call in flight: its reply resolves or rejects it, in request order. */
export interface Pending {
  id: bigint;
  op: string;
  resolve: (result: unknown[]) => void;
  reject: (err: Error) => void;
  /** Runs at once when the OK reply is read, before any message after it. */
  onOK?: (result: unknown[]) => void;
}

/**
 * Conn is one TCP connection: it writes request frames and hands each
 * server message to onMessage, replies matched to their calls in order.
 * It knows nothing of sessions; Client does.
 */
export class Conn {
  readonly socket: Socket;
  private readonly splitter: FrameSplitter;
  private pending: Pending[] = [];
  private head = 0;
  private nextId = 1n;
  lastWrite = Date.now();
  closed = false;
  private draining = false;
  private out: Uint8Array[] = [];

  constructor(
    socket: Socket,
    maxFrame: number,
    private readonly onPush: (m: Message) => void,
    private readonly onReply: (p: Pending, m: Message) => void,
    private readonly onClose: (err: Error) => void,
    private readonly onNotice: (m: Message & { kind: "error" }) => void = () => {},
  ) {
    this.socket = socket;
    this.splitter = new FrameSplitter(maxFrame);
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => this.read(chunk));
    socket.on("error", (err) => this.close(err));
    socket.on("close", () => this.close(new DisconnectedError("tickwheel: connection closed")));
  }

  /**
   * dial opens a TCP connection to host:port, bounded by signal; with tls,
   * a TLS connection whose handshake is done (an untrusted or expired
   * server certificate rejects with an error saying it is TLS's).
   */
  static dial(host: string, port: number, signal?: AbortSignal, tls?: boolean | TLSOptions): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const t = tls === true ? {} : tls || null;
      const s = t
        ? tlsConnect({ host, port, ca: t.ca, cert: t.cert, key: t.key, servername: t.servername ?? (isIP(host) ? undefined : host) })
        : createConnection({ host, port });
      const onAbort = (): void => {
        s.destroy();
        reject(signal!.reason as Error);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      s.once(t ? "secureConnect" : "connect", () => {
        signal?.removeEventListener("abort", onAbort);
        s.removeAllListeners("error");
        resolve(s);
      });
      s.once("error", (err: Error & { code?: string }) => {
        signal?.removeEventListener("abort", onAbort);
        if (t && err.code !== "ECONNREFUSED" && err.code !== "ENOTFOUND" && err.code !== "ETIMEDOUT") {
          reject(new Error(`tickwheel: TLS handshake with ${host}:${port}: ${err.message}`, { cause: err }));
          return;
        }
        reject(err);
      });
    });
  }

  /** inFlight is how many calls wait for their reply. */
  get inFlight(): number {
    return this.pending.length - this.head;
  }

  /**
   * send writes req with a fresh id (or reqId, a change's request id, the
   * same on every attempt) and returns the pending call (resolved by its
   * reply).
   */
  send(req: Omit<Request, "id">, op: string, onOK?: (result: unknown[]) => void, reqId?: bigint): Promise<unknown[]> {
    if (this.closed) return Promise.reject(new DisconnectedError("tickwheel: not connected"));
    const id = reqId ?? this.nextId++;
    const frame = encodeRequest(req, id);
    return new Promise<unknown[]>((resolve, reject) => {
      this.pending.push({ id, op, resolve, reject, onOK });
      this.lastWrite = Date.now();
      // Requests sent in one turn of the event loop leave in one write.
      this.out.push(frame);
      if (this.out.length === 1) process.nextTick(() => this.flush());
    });
  }

  /** flush writes the requests not yet written (they go at the end of the current turn otherwise). */
  flush(): void {
    const out = this.out;
    this.out = [];
    if (this.closed || out.length === 0) return;
    this.socket.write(out.length === 1 ? out[0] : Buffer.concat(out));
  }

  /**
   * drain fails the calls in flight with err and ignores whatever the
   * server sends from now on; the socket stays open until ended, so what
   * was written still reaches the server.
   */
  drain(err: Error): void {
    this.draining = true;
    for (let i = this.head; i < this.pending.length; i++) this.pending[i].reject(err);
    this.pending = [];
    this.head = 0;
  }

  private read(chunk: Buffer): void {
    if (this.closed || this.draining) return;
    this.splitter.push(chunk);
    try {
      for (let p = this.splitter.next(); p !== null; p = this.splitter.next()) {
        const m = decodeMessage(p);
        if (m.kind === "ok" || m.kind === "error") {
          const call = this.pending[this.head];
          if (m.kind === "error" && m.code === NOT_LEADER) {
            // The node is not (or no longer) the leader and closes the
            // connection: the call fails with the reply, the calls after it
            // with a DisconnectedError whose cause names the leader.
            if (call && (m.id === call.id || m.id === 0n)) {
              this.pending[this.head++] = undefined as unknown as Pending;
              this.onReply(call, m);
            }
            this.close(new TickwheelError("connection", m.code, m.message, m.leader));
            return;
          }
          if (!call && m.kind === "error" && m.id === 0n) {
            // Not a reply: the server says why it is closing the connection
            // (a timeout, max_connections); the close follows.
            this.onNotice(m);
            continue;
          }
          if (!call) throw new Error(`tickwheel: a reply (id ${m.id}) to no request`);
          if (m.id !== call.id && m.id !== 0n) throw new Error(`tickwheel: reply id ${m.id}, want ${call.id}`);
          this.pending[this.head++] = undefined as unknown as Pending;
          if (this.head > 1024 && this.head * 2 > this.pending.length) {
            this.pending = this.pending.slice(this.head);
            this.head = 0;
          }
          this.onReply(call, m);
        } else if (m.kind !== "unknown") {
          this.onPush(m);
        }
        if (this.closed) return;
      }
    } catch (err) {
      this.socket.destroy();
      this.close(err as Error);
    }
  }

  /**
   * close ends the connection: every call in flight fails with lost, by
   * default a DisconnectedError.
   */
  close(cause: Error, lost?: Error): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    lost ??= new DisconnectedError(`tickwheel: the connection dropped with the call in flight (${cause.message})`, { cause });
    for (let i = this.head; i < this.pending.length; i++) this.pending[i].reject(lost);
    this.pending = [];
    this.head = 0;
    this.onClose(cause);
  }

  /** pause and resume stop and restart reading the socket (event backpressure). */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }
}

import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";

import { AckState, type AckMode } from "./acks.js";
import { DEFAULT_LEADER_HOPS, bounded, parseAddr, pass, sleepJitter, splitAddrs } from "./cluster.js";
import { Conn, type Pending } from "./connection.js";
import { ClosedError, DisconnectedError, TickwheelError } from "./errors.js";
import { EventQueue, type Event } from "./events.js";
import type { AddOptions, BindOptions, BindResult, CallOptions, ClusterAddOptions, ConnectOptions } from "./options.js";
import {
  Missed, NOT_LEADER, Op, PROTOCOL_VERSION, decodeCluster, decodeHello, decodeListGroupPage, decodeListPage, decodeStats, decodeTimer, decodeUints,
  MAX_U64, toU64, type ClusterState, type Hello, type Limits, type Message, type OpName, type Request, type Stats, type Timer, type U64,
} from "./protocol.js";

interface Bound {
  ephemeral: boolean;
  ack: AckMode;
}

const ACK_DELAY_MS = 2;
const ACK_BATCH = 256;

/**
 * Ops a node that answers not_leader (as it steps down) may be asked again
 * on the next leader: the reads, and the cluster op (its status changes
 * nothing; adding or removing a member again leaves the same members).
 */
const SAFE_TO_RETRY = new Set<string>(["get", "list", "ping", "stats", "cluster"]);

/** The changes: sent with a request id, and again after not_leader or a lost connection, on a server that remembers request ids. */
const CHANGES = new Set<string>(["add", "cancel", "cancel_all", "pause", "resume", "pause_all", "resume_all", "cancel_group"]);

/** A change's request id, fixed at its first attempt on a server that remembers request ids. */
interface Attempt {
  id?: bigint;
  /** final: the change cannot be sent again (the server it would go to does not deduplicate). */
  final?: boolean;
}

/** newClientId returns a random non-zero 64-bit client id. */
function newClientId(): bigint {
  for (;;) {
    const id = randomBytes(8).readBigUInt64BE();
    if (id !== 0n) return id;
  }
}

/** isNotLeader: err is a not_leader reply, or a loss of the connection caused by one. */
function isNotLeader(err: unknown): boolean {
  const e = err instanceof DisconnectedError ? err.cause : err;
  return e instanceof TickwheelError && e.codeNum === NOT_LEADER;
}

/**
 * connect dials a tickwheel server at "host:port", says hello and returns
 * the client. It rejects when the first connection or hello fails (a bad
 * token is a TickwheelError with code "unauthorized").
 *
 * addr may list the nodes of a cluster, "a:7420,b:7420,c:7420" (and
 * opts.addrs more): the client connects to the leader, following the
 * followers' "not_leader" replies (at most opts.leaderHops times from each
 * address, then the next one), on connect and on every reconnect, so that
 * after a failover it binds its receivers again on the new leader. While
 * the nodes answer that they know no leader (an election), connect tries
 * again with backoff, until opts.signal aborts (without one, for at most
 * dialTimeoutMs times the number of addresses).
 */
export async function connect(addr: string, opts: ConnectOptions = {}): Promise<Client> {
  const c = new Client(addr, opts);
  await c.connectFirst(opts.signal);
  return c;
}

/**
 * Client is a connection to tickwheel that pipelines calls (many in
 * flight, replies matched in order), delivers events in order, and
 * reconnects by itself, binding its receivers again. It emits "connect"
 * (each hello), "disconnect" (err) and "warning" (err: a failed
 * reconnect, a failed ack, a handler that threw).
 */
export class Client extends EventEmitter {
  private readonly addrs: string[];
  /** Index in addrs of the address the current (or last) connection began at; a reconnect starts after it. */
  private cursor = 0;
  /** The leader named by the not_leader reply that ended the last connection, tried first ("" for none). */
  private hint = "";
  /** The address of the current (or last) connection. */
  addr = "";
  private conn: Conn | null = null;
  private ready: Conn | null = null;
  private hello!: Hello;
  private closing = false;
  private reconnecting = false;
  private waiters: { resolve: (c: Conn) => void; reject: (e: Error) => void }[] = [];
  private readonly bound = new Map<bigint, Bound>();
  /** This client's id in its changes' request ids (random, fixed for its life; docs/PROTOCOL.md, "Retrying changes"). */
  private readonly clientId = newClientId();
  /** The next change's request id: never reused, across reconnections. */
  private nextChangeId = 1n;
  private readonly lastSeq = new Map<bigint, bigint>();
  private readonly acks = new Map<bigint, AckState>();
  private readonly ackDirty = new Set<bigint>();
  private ackTimer: NodeJS.Timeout | null = null;
  private ackCount = 0;
  private idleTimer: NodeJS.Timeout | null = null;
  private readonly queue: EventQueue;
  private paused = false;
  private droppedTotal = 0n;
  private redeliveredTotal = 0n;

  /** Use connect(). */
  constructor(addr: string, private readonly opts: ConnectOptions) {
    super();
    this.addrs = splitAddrs(addr, opts.addrs);
    const hops = opts.leaderHops ?? DEFAULT_LEADER_HOPS;
    if (!Number.isInteger(hops) || hops < 0) throw new RangeError(`tickwheel: leaderHops ${hops}: want an integer >= 0`);
    const dt = opts.dialTimeoutMs ?? 10000;
    if (!(dt >= 0) || !Number.isFinite(dt)) throw new RangeError(`tickwheel: dialTimeoutMs ${dt}: want a number of ms >= 0`);
    const rc = opts.reconnect;
    if (rc) {
      const min = rc.minMs ?? 100, max = rc.maxMs ?? 5000;
      if (!(min > 0 && max >= min && Number.isFinite(max))) {
        throw new RangeError(`tickwheel: reconnect {minMs: ${rc.minMs}, maxMs: ${rc.maxMs}}: want 0 < minMs <= maxMs (or reconnect: false)`);
      }
    }
    this.queue = new EventQueue(opts.eventBuffer ?? 1024, opts.onEvent ?? null,
      (ev) => this.eventDone(ev),
      (full) => {
        this.paused = full;
        if (full) this.conn?.pause();
        else this.conn?.resume();
      },
      (err) => this.emit("warning", err));
  }

  /** This session's id (it changes with each reconnect). */
  get session(): bigint {
    return this.hello.session;
  }

  /** The tick length in nanoseconds. */
  get tickNs(): bigint {
    return this.hello.tickNs;
  }

  /** The server's limits, from the last hello. */
  get limits(): Limits {
    return this.hello.limits;
  }

  /** The server's version string. */
  get serverVersion(): string {
    return this.hello.serverVersion;
  }

  /** Total of every "dropped" event's count. */
  get dropped(): bigint {
    return this.droppedTotal;
  }

  /** Redelivered events (acknowledged mode) the client dropped because it had delivered them. */
  get redelivered(): bigint {
    return this.redeliveredTotal;
  }

  /** ticks converts milliseconds to ticks, rounding up (at least 1), so a timer never fires early. */
  ticks(ms: number): bigint {
    if (!(ms >= 0) || !Number.isFinite(ms)) throw new RangeError(`tickwheel: ${ms} ms is not a duration`);
    const ns = BigInt(Math.ceil(ms * 1e6));
    const t = (ns + this.hello.tickNs - 1n) / this.hello.tickNs;
    return t > 0n ? t : 1n;
  }

  // ---- connection ----

  /**
   * connectFirst makes passes over the addresses until one connects, with
   * backoff between them while the nodes know no leader (for connect).
   */
  async connectFirst(signal?: AbortSignal): Promise<void> {
    const dt = this.opts.dialTimeoutMs ?? 10000;
    const until = signal || dt === 0 ? Infinity : Date.now() + dt * this.addrs.length;
    const rc = this.opts.reconnect || {};
    let delay = rc.minMs ?? 100;
    for (;;) {
      const failed = await this.open(signal);
      if (!failed) return;
      if (!failed.noLeader || Date.now() + delay / 2 >= until) throw failed.err;
      this.emit("warning", failed.err);
      await sleepJitter(delay, signal);
      delay = Math.min(delay * 2, rc.maxMs ?? 5000);
    }
  }

  /**
   * open makes one pass over the addresses (see connect): it resolves to
   * undefined once connected, or to why it connected nowhere; it rejects
   * when signal aborts or the cluster refuses the hello (a bad token).
   */
  async open(signal?: AbortSignal): Promise<{ err: Error; noLeader: boolean } | undefined> {
    const hint = this.hint;
    this.hint = "";
    const r = await pass(this.addrs, this.cursor, hint, this.opts.leaderHops ?? DEFAULT_LEADER_HOPS,
      (addr) => this.openBounded(addr, signal), signal);
    if (typeof r !== "number") return r;
    if (r >= 0) this.cursor = r;
    return undefined;
  }

  /** openBounded is openAt bounded by dialTimeoutMs. */
  private openBounded(addr: string, signal?: AbortSignal): Promise<void> {
    return bounded(addr, this.opts.dialTimeoutMs ?? 10000, signal, (s) => this.openAt(addr, s));
  }

  /** openAt dials addr, says hello and binds the receivers again; signal bounds the dial and the hello. */
  private async openAt(addr: string, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const { host, port } = parseAddr(addr);
    const socket = await Conn.dial(host, port, signal, this.opts.tls);
    if (signal?.aborted) {
      socket.destroy();
      throw signal.reason;
    }
    const cn = new Conn(socket, this.opts.maxFrame ?? 64 << 20,
      (m) => this.onPush(cn, m), (p, m) => this.onReply(p, m), (err) => this.onClose(cn, err),
      (m) => this.emit("warning", new TickwheelError("connection", m.code, m.message)));
    this.conn = cn;
    if (this.paused) cn.pause();
    // An abort while the hello is in flight (a listener that never answers) closes the connection.
    const onAbort = (): void => cn.close(signal!.reason as Error, signal!.reason as Error);
    signal?.addEventListener("abort", onAbort, { once: true });
    const res = await cn.send({ op: Op.hello, version: BigInt(PROTOCOL_VERSION), name: this.opts.name ?? "", token: this.opts.token ?? "" }, "hello")
      .catch((err: Error) => {
        cn.close(err);
        throw this.opts.tls ? tlsRefusal(addr, err) : err;
      })
      .finally(() => signal?.removeEventListener("abort", onAbort));
    try {
      this.hello = decodeHello(res);
    } catch (err) {
      cn.close(err as Error);
      throw err;
    }
    for (const [r, b] of this.bound) {
      cn.send({ op: Op.bind, receiver: r, ephemeral: b.ephemeral, ack: b.ack !== "none" }, "bind", (res) => this.bindReplied(r, b, res))
        .catch((err: Error) => {
          if (!(err instanceof DisconnectedError)) this.emit("warning", err);
        });
    }
    this.ready = cn;
    this.addr = addr;
    for (const w of this.waiters.splice(0)) w.resolve(cn);
    this.startIdlePing(cn);
    this.emit("connect", this.hello);
  }

  private onClose(cn: Conn, err: Error): void {
    if (this.conn === cn) this.conn = null;
    if (this.ready !== cn) return; // a connection that never got ready: open() reports it
    this.ready = null;
    if (this.idleTimer) clearInterval(this.idleTimer);
    if (this.closing) return;
    if (err instanceof TickwheelError && err.codeNum === NOT_LEADER) this.hint = err.leader ?? "";
    this.emit("disconnect", err);
    if (this.opts.reconnect === false) {
      this.shutdown(new DisconnectedError("tickwheel: the connection dropped (reconnect off)", { cause: err }));
      return;
    }
    void this.reconnectLoop();
  }

  private async reconnectLoop(): Promise<void> {
    if (this.reconnecting) return;
    this.reconnecting = true;
    const min = (this.opts.reconnect || {}).minMs ?? 100;
    const max = (this.opts.reconnect || {}).maxMs ?? 5000;
    let delay = min;
    while (!this.closing && !this.ready) {
      await new Promise((r) => setTimeout(r, delay / 2 + Math.random() * delay / 2));
      if (this.closing) break;
      try {
        const failed = await this.open();
        if (!failed) continue;
        this.emit("warning", failed.err);
      } catch (err) {
        this.emit("warning", err);
      }
      delay = Math.min(delay * 2, max);
    }
    this.reconnecting = false;
  }

  private startIdlePing(cn: Conn): void {
    const idle = Number(this.hello.limits.idle_timeout_ms ?? 0n);
    if (idle <= 0) return;
    if (this.idleTimer) clearInterval(this.idleTimer);
    this.idleTimer = setInterval(() => {
      if (this.ready === cn && Date.now() - cn.lastWrite >= idle / 3) cn.send({ op: Op.ping }, "ping").catch(() => {});
    }, Math.max(10, idle / 6));
    this.idleTimer.unref();
  }

  private waitConn(signal?: AbortSignal): Promise<Conn> {
    if (this.closing) return Promise.reject(new ClosedError());
    if (this.ready) return Promise.resolve(this.ready);
    return new Promise((resolve, reject) => {
      const w = {
        resolve: (c: Conn) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(c);
        },
        reject: (e: Error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
      };
      const onAbort = (): void => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(signal!.reason as Error);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(w);
    });
  }

  /**
   * call sends one request and returns its OK result; onOK runs as the
   * reply is read. A read answered not_leader (the node steps down) is
   * asked again on the next connection. So is a change (add, cancel,
   * pause, resume, and the bulk cancel_all, pause_all, resume_all,
   * cancel_group), and also after its connection dropped with
   * it in flight, when the server remembers request ids (its hello's
   * request_id_ticks): it carries this client's id and one request id on
   * every attempt, and the server applies it at most once, answering a
   * retry of one it applied with the first reply. Elsewhere a change's
   * not_leader or DisconnectedError goes to the caller: it may have been
   * applied.
   */
  private async call(op: OpName, req: Omit<Request, "id" | "op">, o?: CallOptions, onOK?: (res: unknown[]) => void): Promise<unknown[]> {
    const att: Attempt | undefined = CHANGES.has(op) ? {} : undefined;
    for (;;) {
      try {
        return await this.callOnce(op, req, o, onOK, att);
      } catch (err) {
        const retry = att?.id !== undefined ? !att.final && (isNotLeader(err) || err instanceof DisconnectedError)
          : SAFE_TO_RETRY.has(op) && isNotLeader(err);
        if (!retry || this.opts.reconnect === false || this.closing) throw err;
      }
    }
  }

  private async callOnce(op: OpName, req: Omit<Request, "id" | "op">, o?: CallOptions, onOK?: (res: unknown[]) => void,
    att?: Attempt): Promise<unknown[]> {
    const signal = o?.signal;
    signal?.throwIfAborted();
    const cn = await this.waitConn(signal);
    signal?.throwIfAborted();
    (req as Omit<Request, "id">).op = Op[op]; // req is the caller's fresh object
    if (att) {
      const ids = (this.hello.limits.request_id_ticks ?? 0n) > 0n; // the hello of cn
      if (att.id !== undefined && !ids) {
        att.final = true; // sending it again here could apply it twice; call must not loop on this error
        throw new DisconnectedError(`tickwheel: ${op}: the change may have been applied, and ${this.addr} does not deduplicate a retry`);
      }
      if (ids) {
        att.id ??= this.nextChangeId++;
        req.client = this.clientId;
      }
    }
    const p = cn.send(req as Omit<Request, "id">, op, onOK, att?.id);
    if (!signal) return p;
    return new Promise((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason as Error);
      signal.addEventListener("abort", onAbort, { once: true });
      p.then((v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      }, (e: Error) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      });
    });
  }

  private onReply(p: Pending, m: Message): void {
    if (m.kind === "ok") {
      try {
        p.onOK?.(m.result);
      } catch (err) {
        p.reject(err as Error);
        return;
      }
      p.resolve(m.result);
    } else if (m.kind === "error") {
      p.reject(new TickwheelError(p.op, m.code, m.message, m.leader));
    }
  }

  // ---- events ----

  private onPush(cn: Conn, m: Message): void {
    if (cn !== this.conn) return;
    switch (m.kind) {
      case "fire": {
        const r = m.receiver;
        const last = this.lastSeq.get(r);
        const st = this.acks.get(r);
        const dup = st !== undefined && st.fire(m);
        if (!dup && last !== undefined && m.seq > last + 1n && m.seq !== 1n) this.lost(r, m.seq - last - 1n);
        if (last === undefined || m.seq > last || m.seq === 1n) this.lastSeq.set(r, m.seq);
        if (dup) {
          this.redeliveredTotal++;
        } else {
          this.queue.push(m); // a FireMessage is a FireEvent
        }
        if (st && st.want > st.sent) this.scheduleAck(r, false); // an ack waiting for this redelivery
        return;
      }
      case "takeover":
        this.forget(m.receiver);
        this.queue.push({ kind: "takeover", receiver: m.receiver, session: m.session });
        return;
      case "dropped": {
        const last = this.lastSeq.get(m.receiver);
        if (last === undefined || m.lastSeq > last) this.lastSeq.set(m.receiver, m.lastSeq);
        if (m.lastSeq >= m.firstSeq) this.lost(m.receiver, m.lastSeq - m.firstSeq + 1n);
        return;
      }
    }
  }

  private lost(receiver: bigint, count: bigint): void {
    this.droppedTotal += count;
    this.queue.push({ kind: "dropped", receiver, count });
  }

  private forget(receiver: bigint): void {
    this.bound.delete(receiver);
    this.lastSeq.delete(receiver);
    this.acks.delete(receiver);
  }

  private eventDone(ev: Event): void {
    if (ev.kind !== "fire") return;
    const st = this.acks.get(ev.receiver);
    if (!st || st.mode !== "auto") return;
    if (ev.seq > st.want) st.want = ev.seq;
    this.scheduleAck(ev.receiver, true);
  }

  /**
   * events returns the async iterator of events (fires, takeovers, drops),
   * in order; it ends when the client is closed. An event counts as
   * finished (for auto acks) when the loop asks for the next one. One
   * consumer only, and not with onEvent.
   */
  events(): AsyncIterableIterator<Event> {
    if (this.opts.onEvent) throw new Error("tickwheel: events() with an onEvent handler");
    const q = this.queue;
    const it: AsyncIterableIterator<Event> = {
      next: () => q.next(),
      return: async () => ({ value: undefined, done: true }),
      [Symbol.asyncIterator]: () => it,
    };
    return it;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Event> {
    return this.events();
  }

  // ---- acks ----

  private scheduleAck(receiver: bigint, counted: boolean): void {
    this.ackDirty.add(receiver);
    if (counted && ++this.ackCount >= ACK_BATCH) {
      this.flushAcks();
      return;
    }
    this.ackTimer ??= setTimeout(() => this.flushAcks(), ACK_DELAY_MS);
  }

  /** flushAcks sends the acks due now, one per receiver. */
  private flushAcks(only?: bigint): void {
    if (this.ackTimer && only === undefined) {
      clearTimeout(this.ackTimer);
      this.ackTimer = null;
    }
    if (only === undefined) this.ackCount = 0;
    const cn = this.ready;
    if (!cn) return;
    for (const r of only === undefined ? [...this.ackDirty] : [only]) {
      this.ackDirty.delete(r);
      const st = this.acks.get(r);
      const seq = st?.due() ?? 0n;
      if (!st || seq === 0n) continue;
      st.sent = seq;
      cn.send({ op: Op.ack, receiver: r, seq }, "ack", () => st.confirmed(seq)).catch((err: Error) => {
        if (!(err instanceof DisconnectedError) && !(err instanceof ClosedError)) this.emit("warning", err);
      });
    }
  }

  /**
   * ack acknowledges every event of the receiver up to seq (acknowledged
   * mode): the server forgets them. Acks are cumulative and batched; one
   * covering events from an earlier connection goes out once their
   * redelivery has reached this one. Failures are emitted as "warning".
   * It throws if the receiver is not bound here in acknowledged mode.
   */
  ack(receiver: U64, seq: U64): void {
    const r = toU64(receiver, "receiver");
    const st = this.acks.get(r);
    if (!st) throw new Error(`tickwheel: ack: receiver ${r} is not bound here in acknowledged mode`);
    const s = toU64(seq, "seq");
    if (s > st.want) st.want = s;
    this.scheduleAck(r, true);
  }

  // ---- ops ----

  /**
   * bind makes this client the receiver's destination, taking it over
   * from any other session. Its pending events follow at once, after a
   * "dropped" event when the server gave some up. The client binds it
   * again, with the same options, after each reconnect.
   */
  async bind(receiver: U64, o: BindOptions = {}): Promise<BindResult> {
    const r = toU64(receiver, "receiver");
    const b: Bound = { ephemeral: o.ephemeral ?? false, ack: o.ack ?? "none" };
    if (!["none", "auto", "manual"].includes(b.ack)) throw new RangeError(`tickwheel: bind: ack mode ${b.ack}`);
    const res = await this.call("bind", { receiver: r, ephemeral: b.ephemeral, ack: b.ack !== "none" }, o,
      (res) => this.bindReplied(r, b, res));
    const [pending, dropped, firstSeq] = decodeUints(res, 3, "bind result");
    return { pending, dropped, firstSeq };
  }

  private bindReplied(r: bigint, b: Bound, res: unknown[]): void {
    const [, dropped, firstSeq] = decodeUints(res, 3, "bind result");
    this.bound.set(r, b);
    if (b.ack !== "none") {
      const st = this.acks.get(r) ?? new AckState(b.ack);
      st.mode = b.ack;
      st.bound(firstSeq);
      this.acks.set(r, st);
    } else {
      this.acks.delete(r);
    }
    if (firstSeq > 0n) this.lastSeq.set(r, firstSeq - 1n);
    else this.lastSeq.delete(r);
    if (dropped > 0n) this.lost(r, dropped);
  }

  /** unbind stops the receiver's events coming here (acks due are sent first); its timers stay. */
  async unbind(receiver: U64, o?: CallOptions): Promise<void> {
    const r = toU64(receiver, "receiver");
    this.flushAcks(r);
    await this.call("unbind", { receiver: r }, o, () => this.forget(r));
  }

  private addReq(receiver: U64, tid: U64, o: AddOptions): Omit<Request, "id" | "op"> {
    let repeat = 1n;
    if (o.repeat === "forever") repeat = 0n;
    else if (o.repeat !== undefined && o.repeat !== 0) {
      if (!Number.isInteger(o.repeat) || o.repeat < 0 || o.repeat > 0xffffffff) {
        throw new RangeError(`tickwheel: repeat ${o.repeat}: want 1..2^32-1 or "forever"`);
      }
      repeat = BigInt(o.repeat);
    }
    const missed = Missed[o.missed ?? "all"] as number | undefined;
    if (missed === undefined) throw new RangeError(`tickwheel: missed ${String(o.missed)}: want "all", "once" or "skip"`);
    if (o.data != null && typeof o.data !== "string" && !(o.data instanceof Uint8Array)) {
      throw new RangeError(`tickwheel: data: want a string or a Uint8Array, got ${typeof o.data}`);
    }
    const data = typeof o.data === "string" ? new TextEncoder().encode(o.data) : o.data ?? null;
    return {
      receiver: toU64(receiver, "receiver"), tid: toU64(tid, "tid"), every: toU64(o.every ?? 0, "every"), repeat, data,
      replace: o.replace ?? false, afterNs: toU64(o.afterNs ?? 0, "afterNs"), schedule: o.schedule ?? "",
      zone: o.zone ?? "", missed: BigInt(missed), group: toU64(o.group ?? 0, "group"),
    };
  }

  /**
   * add adds timer (receiver, tid), first firing `after` ticks from now; it returns the due tick.
   * `after` 0 fires at the server's next tick (now + 1), as soon as it can.
   */
  async add(receiver: U64, tid: U64, after: U64, o: AddOptions = {}): Promise<bigint> {
    const req = this.addReq(receiver, tid, o);
    req.after = toU64(after, "after");
    const res = await this.call("add", req, o);
    return decodeUints(res, 1, "add result")[0];
  }

  /**
   * addAt adds a timer whose first firing is at tick `at`; it returns the due tick. An `at` at or
   * before the server's now fires at its next tick (now + 1), its first event's `late` counting
   * the ticks `at` was in the past. `at` 0 is the wire's "no at": the same as `add` with 0.
   */
  async addAt(receiver: U64, tid: U64, at: U64, o: AddOptions = {}): Promise<bigint> {
    const req = this.addReq(receiver, tid, o);
    req.at = toU64(at, "at");
    const res = await this.call("add", req, o);
    return decodeUints(res, 1, "add result")[0];
  }

  /**
   * addAfter adds a timer first firing `ms` milliseconds of tw-time after the server reads the
   * request: at the first tick boundary at or after that moment, so at speed 1 it never fires
   * early (it sends after_ns, and `after` rounded up for servers that predate after_ns). With
   * `every` 0 it repeats every `ms` rounded up to whole ticks. `add` instead counts whole ticks
   * from the current tick, which began up to a tick earlier: up to a tick sooner in real time.
   * `ms` <= 0 (a deadline already reached, `deadline - Date.now()`) fires at the server's next
   * tick, as soon as it can (with `late` 0: the server is not told how far in the past it was;
   * `every` 0 is then one tick).
   */
  async addAfter(receiver: U64, tid: U64, ms: number, o: AddOptions = {}): Promise<bigint> {
    if (typeof ms !== "number" || Number.isNaN(ms) || ms === Infinity) throw new RangeError(`tickwheel: ${ms} ms: want a finite duration`);
    const req = this.addReq(receiver, tid, o);
    if (ms > 0) {
      req.afterNs = BigInt(Math.ceil(ms * 1e6));
      if (req.afterNs > MAX_U64) throw new RangeError(`tickwheel: ${ms} ms: past 2^64-1 ns (about 584 years)`);
      req.after = this.ticks(ms);
    } // else a zero delay: no after, no after_ns
    const res = await this.call("add", req, o);
    return decodeUints(res, 1, "add result")[0];
  }

  /**
   * addSchedule adds a timer on a calendar schedule: a cron expression (5 fields, or @daily,
   * @hourly, @every 90s, ...) evaluated on tw-time's calendar in `o.zone` (default UTC). It fires
   * at every time the schedule names until cancelled, unless `o.repeat` is a count; it returns
   * the tick of the first firing. A bad expression or zone is "invalid_argument", naming it.
   */
  async addSchedule(receiver: U64, tid: U64, schedule: string, o: AddOptions = {}): Promise<bigint> {
    // An empty one would be sent as no schedule at all: a plain add.
    if (typeof schedule !== "string" || schedule === "") throw new RangeError(`tickwheel: addSchedule: want a cron expression, got ${JSON.stringify(schedule)}`);
    const req = this.addReq(receiver, tid, { ...o, schedule });
    if (o.repeat === undefined || o.repeat === 0) req.repeat = 0n; // a schedule names many times
    const res = await this.call("add", req, o);
    return decodeUints(res, 1, "add result")[0];
  }

  /** cancel removes a timer ("not_found" if there is none). */
  async cancel(receiver: U64, tid: U64, o?: CallOptions): Promise<void> {
    await this.call("cancel", { receiver: toU64(receiver, "receiver"), tid: toU64(tid, "tid") }, o);
  }

  /** get returns a timer ("not_found" if there is none). */
  async get(receiver: U64, tid: U64, o?: CallOptions): Promise<Timer> {
    const res = await this.call("get", { receiver: toU64(receiver, "receiver"), tid: toU64(tid, "tid") }, o);
    return decodeTimer(res[0]);
  }

  /** listPage returns the receiver's timers with tid >= fromTid, in tid order, and the next page's fromTid (0: no more). */
  async listPage(receiver: U64, fromTid: U64 = 0n, limit: U64 = 0n, o?: CallOptions): Promise<{ timers: Timer[]; next: bigint }> {
    const res = await this.call("list", { receiver: toU64(receiver, "receiver"), fromTid: toU64(fromTid, "fromTid"), limit: toU64(limit, "limit") }, o);
    return decodeListPage(res);
  }

  /** list returns all of the receiver's timers in tid order, a page at a time (not a snapshot). */
  async list(receiver: U64, o?: CallOptions): Promise<Timer[]> {
    const out: Timer[] = [];
    let from = 0n;
    do {
      const page = await this.listPage(receiver, from, 0n, o);
      out.push(...page.timers);
      from = page.next;
    } while (from !== 0n);
    return out;
  }

  /** cancelAll cancels all of the receiver's timers and returns how many. */
  async cancelAll(receiver: U64, o?: CallOptions): Promise<bigint> {
    const res = await this.call("cancel_all", { receiver: toU64(receiver, "receiver") }, o);
    return decodeUints(res, 1, "cancel_all result")[0];
  }

  private async bulk(op: "cancel_group" | "pause_all" | "resume_all", receiver: bigint, group: bigint, o?: CallOptions): Promise<bigint> {
    return decodeUints(await this.call(op, { receiver, group }, o), 1, `${op} result`)[0];
  }

  private static group(group: U64): bigint {
    const g = toU64(group, "group");
    if (g === 0n) throw new RangeError("tickwheel: group 0 is no group: name one");
    return g;
  }

  /**
   * cancelGroup cancels every timer of the group and returns how many. Like the other bulk calls,
   * the server does a large one in chunks between its other work and answers once it is complete;
   * it covers the timers there when it began, and a timer due before the server reaches it fires first.
   */
  async cancelGroup(group: U64, o?: CallOptions): Promise<bigint> {
    return this.bulk("cancel_group", 0n, Client.group(group), o);
  }

  /** pauseAll pauses every running timer of the receiver, each keeping the ticks it had left; timers added to it start paused until resumeAll. */
  async pauseAll(receiver: U64, o?: CallOptions): Promise<bigint> {
    return this.bulk("pause_all", toU64(receiver, "receiver"), 0n, o);
  }

  /** resumeAll resumes every paused timer of the receiver with the ticks it had left, and returns how many. */
  async resumeAll(receiver: U64, o?: CallOptions): Promise<bigint> {
    return this.bulk("resume_all", toU64(receiver, "receiver"), 0n, o);
  }

  /** pauseGroup pauses every running timer of the group, each keeping the ticks it had left; timers added to it start paused until resumeGroup. */
  async pauseGroup(group: U64, o?: CallOptions): Promise<bigint> {
    return this.bulk("pause_all", 0n, Client.group(group), o);
  }

  /** resumeGroup resumes every paused timer of the group with the ticks it had left, and returns how many. */
  async resumeGroup(group: U64, o?: CallOptions): Promise<bigint> {
    return this.bulk("resume_all", 0n, Client.group(group), o);
  }

  /** listGroupPage returns the group's timers from (fromReceiver, fromTid) on, in (receiver, tid) order, and the next page's cursor ((0n, 0n): no more). */
  async listGroupPage(group: U64, fromReceiver: U64 = 0n, fromTid: U64 = 0n, limit: U64 = 0n, o?: CallOptions): Promise<{ timers: Timer[]; nextReceiver: bigint; nextTid: bigint }> {
    const res = await this.call("list_group", {
      group: toU64(group, "group"), fromReceiver: toU64(fromReceiver, "fromReceiver"), fromTid: toU64(fromTid, "fromTid"), limit: toU64(limit, "limit"),
    }, o);
    return decodeListGroupPage(res);
  }

  /** listGroup returns all of the group's timers in (receiver, tid) order, a page at a time (not a snapshot). */
  async listGroup(group: U64, o?: CallOptions): Promise<Timer[]> {
    const out: Timer[] = [];
    let r = 0n, t = 0n;
    do {
      const page = await this.listGroupPage(group, r, t, 0n, o);
      out.push(...page.timers);
      r = page.nextReceiver;
      t = page.nextTid;
    } while (r !== 0n || t !== 0n);
    return out;
  }

  /** pause freezes the ticks left until the timer's next firing ("bad_state" if paused). */
  async pause(receiver: U64, tid: U64, o?: CallOptions): Promise<void> {
    await this.call("pause", { receiver: toU64(receiver, "receiver"), tid: toU64(tid, "tid") }, o);
  }

  /** resume continues a paused timer with exactly the ticks it had left ("bad_state" if running). */
  async resume(receiver: U64, tid: U64, o?: CallOptions): Promise<void> {
    await this.call("resume", { receiver: toU64(receiver, "receiver"), tid: toU64(tid, "tid") }, o);
  }

  /** ping returns tw-time. */
  async ping(o?: CallOptions): Promise<bigint> {
    return decodeUints(await this.call("ping", {}, o), 1, "ping result")[0];
  }

  /** fastForward (admin) moves tw-time on by ticks, firing everything due on the way; its events come before it resolves. */
  async fastForward(ticks: U64, o?: CallOptions): Promise<{ now: bigint; fired: bigint }> {
    const [now, fired] = decodeUints(await this.call("fast_forward", { ticks: toU64(ticks, "ticks") }, o), 2, "fast_forward result");
    return { now, fired };
  }

  /** freeze (admin) stops tw-time following the clock. */
  async freeze(o?: CallOptions): Promise<bigint> {
    return decodeUints(await this.call("freeze", {}, o), 1, "freeze result")[0];
  }

  /** resumeSync (admin) lets tw-time follow the clock again, from where it is. */
  async resumeSync(o?: CallOptions): Promise<bigint> {
    return decodeUints(await this.call("resume_sync", {}, o), 1, "resume_sync result")[0];
  }

  /** setSpeed (admin) runs tw-time speed times real time, in [0.001, 1e6]; while frozen it stays frozen. */
  async setSpeed(speed: number, o?: CallOptions): Promise<bigint> {
    return decodeUints(await this.call("set_speed", { speed }, o), 1, "set_speed result")[0];
  }

  /** stats (admin) returns the server's counters. */
  async stats(o?: CallOptions): Promise<Stats> {
    return decodeStats(await this.call("stats", {}, o));
  }
  /**
   * clusterStatus (admin) returns the cluster's state as its leader sees
   * it: role, leader, term, commit and applied index, and the members. A
   * single server (no cluster.id) rejects with "bad_state".
   */
  async clusterStatus(o?: CallOptions): Promise<ClusterState> {
    return decodeCluster(await this.call("cluster", { command: "status" }, o));
  }

  /**
   * clusterAdd (admin) adds node id, whose raft traffic listens at raftAddr
   * ("host:port"), to the cluster. The node must run already, started
   * without peers (waiting to be added, or with cluster.join) with the
   * cluster's id and token. It joins as a non-voter, which counts in no
   * quorum while it catches up from a snapshot and the log, and is promoted
   * to a voter once its log is within cluster.catch_up_entries of the
   * leader's: the promise resolves to the cluster's state then (give
   * o.signal time for a big snapshot; the leader gives up after
   * cluster.catch_up_timeout with "unavailable", the node staying a
   * non-voter: clusterPromote later). With o.nonvoter it stays a non-voter
   * (a read replica, e.g. at a standby site: its failure or distance slows
   * no commit) and the promise resolves once that change is committed; a
   * voter is then refused ("bad_state"). Adding a voter again at the same
   * address changes nothing; adding a non-voter again promotes it.
   */
  async clusterAdd(id: string, raftAddr: string, o?: ClusterAddOptions): Promise<ClusterState> {
    const command = o?.nonvoter ? "add_nonvoter" : "add";
    return decodeCluster(await this.call("cluster", { command, node: id, addr: raftAddr }, o));
  }

  /**
   * clusterPromote (admin) makes non-voter id a voter once it has caught
   * up (as clusterAdd does after adding it) and resolves to the cluster's
   * state then. A voter is left as it is; a node not in the cluster
   * rejects with "bad_state".
   */
  async clusterPromote(id: string, o?: CallOptions): Promise<ClusterState> {
    return decodeCluster(await this.call("cluster", { command: "promote", node: id }, o));
  }

  /**
   * clusterCheck (admin) asks for a state check: the leader marks its
   * replicated log and every node hashes its state at the mark. It
   * resolves, once the mark is committed, to the cluster's state with the
   * check's id in check; each node's digest for it is on that node's status
   * page (/status.json, cluster.state_check), and they must all be equal
   * (docs/OPERATIONS.md, "Checking that the nodes agree"). Rejects with
   * "unavailable" when leadership changed before the mark was committed.
   */
  async clusterCheck(o?: CallOptions): Promise<ClusterState> {
    return decodeCluster(await this.call("cluster", { command: "check" }, o));
  }

  /**
   * clusterRemove (admin) removes node id from the cluster and resolves to
   * the cluster's state once the change is committed. Removing the leader
   * makes it step down: the connection may close before the reply (it is
   * asked again on the next leader, where the member is already gone).
   */
  async clusterRemove(id: string, o?: CallOptions): Promise<ClusterState> {
    return decodeCluster(await this.call("cluster", { command: "remove", node: id }, o));
  }


  /**
   * close sends the acks due, closes the connection and ends the event
   * iterator. Calls in flight or waiting reject with a ClosedError.
   */
  async close(): Promise<void> {
    if (this.closing) return;
    this.flushAcks();
    const cn = this.ready ?? this.conn;
    this.shutdown(new ClosedError());
    if (cn && !cn.closed) {
      const gone = new Promise<void>((r) => {
        cn.socket.once("close", () => r());
        setTimeout(r, 1000).unref();
      });
      cn.flush();
      cn.drain(new ClosedError());
      cn.socket.end();
      await gone;
      cn.close(new ClosedError(), new ClosedError());
    }
  }

  private shutdown(err: Error): void {
    this.closing = true;
    if (this.ackTimer) clearTimeout(this.ackTimer);
    if (this.idleTimer) clearInterval(this.idleTimer);
    for (const w of this.waiters.splice(0)) w.reject(err);
    this.queue.end();
  }
}

/**
 * tlsRefusal says what a connection lost before the hello's reply means
 * over TLS: the server refused the client's certificate, which TLS 1.3
 * reports only after the client's handshake has ended (as an alert at the
 * first read). Other errors are returned as they are.
 */
function tlsRefusal(addr: string, err: Error): Error {
  const msg = `${err.message} ${(err.cause as Error | undefined)?.message ?? ""}`;
  if (!(err instanceof DisconnectedError)) return err;
  if (/certificate required/.test(msg)) {
    return new DisconnectedError(`tickwheel: ${addr} requires a TLS client certificate (mTLS) and none was given (tls.cert, tls.key)`, { cause: err });
  }
  if (/alert/.test(msg)) {
    return new DisconnectedError(`tickwheel: ${addr} refused the TLS client certificate: ${err.message}`, { cause: err });
  }
  return err;
}

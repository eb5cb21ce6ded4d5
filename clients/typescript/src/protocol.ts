// The tickwheel wire protocol, version 1 (docs/PROTOCOL.md): frames,
// request encoding and server message decoding. Pure functions over
// bytes, no sockets.
//
// Requests are encoded by hand so that their bytes are exactly the
// reference encoder's (the smallest unsigned integer encodings, speed
// always float64): the test vectors check it. Server messages are decoded
// with @msgpack/msgpack (useBigInt64: uint64 values come back exact).

import { Decoder } from "@msgpack/msgpack";

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;
/** Size of a frame header: a 4-byte big-endian payload length. */
export const HEADER_SIZE = 4;

/** Request ops. 20..25 are admin ops. */
export const Op = {
  hello: 1,
  bind: 2,
  unbind: 3,
  add: 4,
  cancel: 5,
  get: 6,
  list: 7,
  cancel_all: 8,
  pause: 9,
  resume: 10,
  ping: 11,
  ack: 12,
  pause_all: 13,
  resume_all: 14,
  list_group: 15,
  cancel_group: 16,
  fast_forward: 20,
  freeze: 21,
  resume_sync: 22,
  set_speed: 23,
  stats: 24,
  cluster: 25,
} as const;
export type OpName = keyof typeof Op;

/** Server message kinds. */
export const Kind = { ok: 0, error: 1, fire: 2, takeover: 3, dropped: 4 } as const;

/** Error codes and their names. Codes are stable; new ones may be added. */
export const ErrorCodes = {
  1: "malformed",
  2: "unknown_op",
  3: "unauthorized",
  4: "hello_required",
  5: "not_found",
  6: "exists",
  7: "invalid_argument",
  8: "limit_exceeded",
  9: "bad_state",
  10: "unsupported_version",
  11: "internal",
  12: "timeout",
  13: "unavailable",
  14: "not_leader",
  17: "request_id_reused",
} as const;

/** The not_leader code: a cluster follower's answer to every request, naming the leader's address. */
export const NOT_LEADER = 14;
export type ErrorCodeName = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** codeName returns a code's protocol name, or "code(N)" for one this client does not know. */
export function codeName(code: number): string {
  return (ErrorCodes as Record<number, string>)[code] ?? `code(${code})`;
}

/** Missed-firing policies of an add (AddOptions.missed). */
export const Missed = { all: 0, once: 1, skip: 2 } as const;

/** A uint64 as the API takes it: a bigint, or a safe non-negative integer number. */
export type U64 = bigint | number;

/** The largest uint64. */
export const MAX_U64 = (1n << 64n) - 1n;

/** toU64 checks and converts v to a bigint uint64; it throws a RangeError otherwise. */
export function toU64(v: U64, what: string): bigint {
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v) || v < 0) {
      throw new RangeError(`tickwheel: ${what} must be a non-negative safe integer or a bigint, got ${v}`);
    }
    return BigInt(v);
  }
  if (typeof v !== "bigint" || v < 0n || v > MAX_U64) {
    throw new RangeError(`tickwheel: ${what} must be a uint64, got ${String(v)}`);
  }
  return v;
}

/** A request: op and id, then the op's arguments (omitted ones take their defaults). */
export interface Request {
  op: number;
  id: bigint;
  version?: bigint;
  name?: string;
  token?: string;
  receiver?: bigint;
  tid?: bigint;
  after?: bigint;
  at?: bigint;
  every?: bigint;
  repeat?: bigint;
  data?: Uint8Array | null;
  replace?: boolean;
  afterNs?: bigint;
  schedule?: string;
  zone?: string;
  missed?: bigint;
  /** add: the timer's group (0: none); pause_all, resume_all: the group acted on (receiver 0); cancel_group, list_group: the group */
  group?: bigint;
  /** list_group's cursor, with fromTid */
  fromReceiver?: bigint;
  ephemeral?: boolean;
  ack?: boolean;
  fromTid?: bigint;
  limit?: bigint;
  seq?: bigint;
  ticks?: bigint;
  speed?: number;
  /** cluster: the sub-command (status, add, remove), the node id, its raft address */
  command?: string;
  node?: string;
  addr?: string;
  /**
   * add, cancel, pause, resume and the bulk ops (cancel_all, pause_all,
   * resume_all, cancel_group): the client's id, which with the
   * request's id makes a change the server applies at most once (its last
   * argument; docs/PROTOCOL.md, "Retrying changes"). 0 or absent: none.
   */
  client?: bigint;
}

type ArgKind = "u" | "s" | "d" | "b" | "f";
type Arg = [keyof Request, ArgKind];

/** Each op's arguments in wire order. */
const opArgs: Record<number, Arg[]> = {
  [Op.hello]: [["version", "u"], ["name", "s"], ["token", "s"]],
  [Op.bind]: [["receiver", "u"], ["ephemeral", "b"], ["ack", "b"]],
  [Op.unbind]: [["receiver", "u"]],
  [Op.add]: [
    ["receiver", "u"], ["tid", "u"], ["after", "u"], ["at", "u"], ["every", "u"], ["repeat", "u"],
    ["data", "d"], ["replace", "b"], ["afterNs", "u"], ["schedule", "s"], ["zone", "s"], ["missed", "u"], ["group", "u"],
    ["client", "u"],
  ],
  [Op.cancel]: [["receiver", "u"], ["tid", "u"], ["client", "u"]],
  [Op.get]: [["receiver", "u"], ["tid", "u"]],
  [Op.list]: [["receiver", "u"], ["fromTid", "u"], ["limit", "u"]],
  [Op.cancel_all]: [["receiver", "u"], ["client", "u"]],
  [Op.cancel_group]: [["group", "u"], ["client", "u"]],
  [Op.pause_all]: [["receiver", "u"], ["group", "u"], ["client", "u"]],
  [Op.resume_all]: [["receiver", "u"], ["group", "u"], ["client", "u"]],
  [Op.list_group]: [["group", "u"], ["fromReceiver", "u"], ["fromTid", "u"], ["limit", "u"]],
  [Op.pause]: [["receiver", "u"], ["tid", "u"], ["client", "u"]],
  [Op.resume]: [["receiver", "u"], ["tid", "u"], ["client", "u"]],
  [Op.ping]: [],
  [Op.ack]: [["receiver", "u"], ["seq", "u"]],
  [Op.fast_forward]: [["ticks", "u"]],
  [Op.freeze]: [],
  [Op.resume_sync]: [],
  [Op.set_speed]: [["speed", "f"]],
  [Op.stats]: [],
  [Op.cluster]: [["command", "s"], ["node", "s"], ["addr", "s"]],
};

/**
 * baseArgs: for an op whose later arguments came after version 1 first
 * shipped, how many arguments are always encoded; the later ones only up
 * to the last that is set, so an add that uses none of them has the bytes
 * it always had.
 */
const baseArgs: Record<number, number> = {
  [Op.add]: 8, [Op.cancel]: 2, [Op.cancel_all]: 1, [Op.pause]: 2, [Op.resume]: 2,
  [Op.cancel_group]: 1, [Op.pause_all]: 2, [Op.resume_all]: 2,
};

function isDefault(r: Omit<Request, "id">, name: keyof Request): boolean {
  const v = (r as Request)[name];
  return v === undefined || v === null || v === 0n || v === "" || v === false;
}

const utf8 = new TextEncoder();

/** A growable byte buffer with msgpack writers for the types requests use. */
class Writer {
  buf = new Uint8Array(64);
  view = new DataView(this.buf.buffer);
  n = 0;

  private room(k: number): void {
    if (this.n + k <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.n + k) size *= 2;
    const b = new Uint8Array(size);
    b.set(this.buf.subarray(0, this.n));
    this.buf = b;
    this.view = new DataView(b.buffer);
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.n++] = b;
  }

  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.n);
    this.n += b.length;
  }

  uint(v: bigint): void {
    this.room(9);
    if (v < 0x80n) {
      this.buf[this.n++] = Number(v);
    } else if (v <= 0xffn) {
      this.buf[this.n++] = 0xcc;
      this.buf[this.n++] = Number(v);
    } else if (v <= 0xffffn) {
      this.buf[this.n++] = 0xcd;
      this.view.setUint16(this.n, Number(v));
      this.n += 2;
    } else if (v <= 0xffffffffn) {
      this.buf[this.n++] = 0xce;
      this.view.setUint32(this.n, Number(v));
      this.n += 4;
    } else {
      if (v > MAX_U64) throw new RangeError(`tickwheel: ${v} does not fit a uint64`); // setBigUint64 would wrap it
      this.buf[this.n++] = 0xcf;
      this.view.setBigUint64(this.n, v);
      this.n += 8;
    }
  }

  arrayHeader(n: number): void {
    if (n < 16) this.byte(0x90 | n);
    else {
      this.byte(0xdc);
      this.room(2);
      this.view.setUint16(this.n, n);
      this.n += 2;
    }
  }

  private lenHeader(n: number, fix: number | null, b8: number, b16: number, b32: number): void {
    this.room(5);
    if (fix !== null && n < 32) this.buf[this.n++] = fix | n;
    else if (n <= 0xff) {
      this.buf[this.n++] = b8;
      this.buf[this.n++] = n;
    } else if (n <= 0xffff) {
      this.buf[this.n++] = b16;
      this.view.setUint16(this.n, n);
      this.n += 2;
    } else {
      this.buf[this.n++] = b32;
      this.view.setUint32(this.n, n);
      this.n += 4;
    }
  }

  str(s: string): void {
    const b = utf8.encode(s);
    this.lenHeader(b.length, 0xa0, 0xd9, 0xda, 0xdb);
    this.bytes(b);
  }

  bin(b: Uint8Array): void {
    this.lenHeader(b.length, null, 0xc4, 0xc5, 0xc6);
    this.bytes(b);
  }

  f64(v: number): void {
    this.room(9);
    this.buf[this.n++] = 0xcb;
    this.view.setFloat64(this.n, v);
    this.n += 8;
  }
}

const shared = new Writer(); // encodeRequest's scratch: the frame is copied out

/**
 * encodeRequest returns r as one whole frame (header and payload): op, id
 * and every argument r.op takes, in wire order (the later optional ones
 * only up to the last that is set). Empty data is encoded as nil. An op
 * this client does not know is encoded as [op, id]. id, when given, is
 * used instead of r.id.
 */
export function encodeRequest(r: Omit<Request, "id">, id?: bigint): Uint8Array {
  const w = shared;
  w.n = HEADER_SIZE;
  let args = opArgs[r.op] ?? [];
  const base = baseArgs[r.op] ?? 0;
  if (base > 0) {
    let n = args.length;
    while (n > base && isDefault(r, args[n - 1][0])) n--;
    args = args.slice(0, n);
  }
  w.arrayHeader(2 + args.length);
  w.uint(BigInt(r.op));
  w.uint(id ?? (r as Request).id);
  for (const [name, kind] of args) {
    const v = r[name as keyof typeof r];
    switch (kind) {
      case "u":
        w.uint((v as bigint | undefined) ?? 0n);
        break;
      case "s":
        w.str((v as string | undefined) ?? "");
        break;
      case "d": {
        const d = v as Uint8Array | null | undefined;
        if (d && d.length > 0) w.bin(d);
        else w.byte(0xc0);
        break;
      }
      case "b":
        w.byte(v ? 0xc3 : 0xc2);
        break;
      case "f":
        w.f64((v as number | undefined) ?? 0);
        break;
    }
  }
  w.view.setUint32(0, w.n - HEADER_SIZE);
  return w.buf.slice(0, w.n);
}

/** FrameError is thrown by FrameSplitter for a frame the client refuses. */
export class FrameError extends Error {}

/**
 * FrameSplitter cuts a byte stream into frame payloads. Feed it what the
 * socket reads; next() returns each whole payload in turn, or null when
 * more bytes are needed. A payload longer than maxFrame, or of length 0,
 * is a FrameError.
 */
export class FrameSplitter {
  private buf: Uint8Array = new Uint8Array(0);
  private off = 0;

  constructor(private readonly maxFrame: number) {}

  push(chunk: Uint8Array): void {
    if (this.off >= this.buf.length) {
      this.buf = chunk;
    } else {
      const rest = this.buf.subarray(this.off);
      const b = new Uint8Array(rest.length + chunk.length);
      b.set(rest);
      b.set(chunk, rest.length);
      this.buf = b;
    }
    this.off = 0;
  }

  next(): Uint8Array | null {
    const left = this.buf.length - this.off;
    if (left < HEADER_SIZE) return null;
    const b = this.buf;
    const o = this.off;
    const n = ((b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]) >>> 0;
    if (n === 0) throw new FrameError("tickwheel: empty frame from the server");
    if (n > this.maxFrame) throw new FrameError(`tickwheel: frame of ${n} bytes from the server, more than ${this.maxFrame}`);
    if (left < HEADER_SIZE + n) return null;
    this.off = o + HEADER_SIZE + n;
    return b.subarray(o + HEADER_SIZE, this.off);
  }
}

/** MalformedMessageError: a server message that is not of the documented shape. */
export class MalformedMessageError extends Error {}

/**
 * A timer's total number of firings as decoded timers and fire events give it:
 * a count, or "forever" for a timer that fires until cancelled (the wire's
 * repeat 0), the way AddOptions.repeat asks for one.
 */
export type Repeat = bigint | "forever";

/** repeatOf returns the Repeat of a wire repeat: "forever" for 0. */
function repeatOf(v: bigint): Repeat {
  return v === 0n ? "forever" : v;
}

/** A fire event: timer (receiver, tid) fired for tick. */
export interface FireMessage {
  kind: "fire";
  receiver: bigint;
  tid: bigint;
  /** The tick the timer was due at. */
  tick: bigint;
  /** 1-based count of this timer's firings, this one included. */
  fired: bigint;
  /** Total firings, or "forever" (the wire's 0), as in AddOptions.repeat. */
  repeat: Repeat;
  /** This firing removed the timer. */
  last: boolean;
  /** The timer's data, or null; a copy the caller owns. */
  data: Uint8Array | null;
  /** The receiver's event sequence number, from 1. */
  seq: bigint;
  /** Ticks after `tick` the timer fired (0 normally). */
  late: bigint;
}

/** A decoded server message. */
export type Message =
  | { kind: "ok"; id: bigint; result: unknown[] }
  /** leader: a not_leader error's fifth element, the leader's client address ("" when unknown or absent). */
  | { kind: "error"; id: bigint; code: number; message: string; leader?: string }
  | FireMessage
  | { kind: "takeover"; receiver: bigint; session: bigint }
  | { kind: "dropped"; receiver: bigint; firstSeq: bigint; lastSeq: bigint }
  | { kind: "unknown"; kindCode: number };

/** A live timer, as get and list return it. */
export interface Timer {
  receiver: bigint;
  tid: bigint;
  /** Tick of the next firing (for a paused timer, now + remaining). */
  due: bigint;
  /** Ticks until then; frozen while paused. */
  remaining: bigint;
  /** Interval between firings. */
  every: bigint;
  /** Firings so far. */
  fired: bigint;
  /** Total firings, or "forever" (the wire's 0), as in AddOptions.repeat. */
  repeat: Repeat;
  paused: boolean;
  data: Uint8Array | null;
  /** The calendar schedule (a cron expression), or "" for an interval timer. */
  schedule: string;
  /** The schedule's IANA time zone ("" = UTC). */
  zone: string;
  /** The missed-firing policy: "all", "once" or "skip". */
  missed: keyof typeof Missed;
  /** The timer's group, 0n for none. */
  group: bigint;
}

/** Server limits from the hello reply: bigints keyed by the protocol's names; missing keys are off. */
export type Limits = Partial<Record<
  | "max_frame" | "max_data" | "max_data_total" | "max_timers_per_receiver" | "max_timers"
  | "max_receivers_per_session" | "max_backlog" | "max_backlog_bytes" | "max_backlog_total"
  | "max_backlog_bytes_total" | "max_outbox" | "max_outbox_bytes" | "max_outbox_total"
  | "max_outbox_bytes_total" | "max_outbound" | "max_inbound" | "max_connections" | "max_name"
  | "max_list_page" | "max_list_bytes" | "handshake_timeout_ms" | "idle_timeout_ms" | "frame_timeout_ms"
  | "max_request_ids" | "request_id_ticks",
  bigint>> & Record<string, bigint>;

/** The hello result. */
export interface Hello {
  session: bigint;
  now: bigint;
  tickNs: bigint;
  serverVersion: string;
  limits: Limits;
}

/**
 * The admin stats result, camelCase like every other result (the wire's
 * snake_case names, firedTotal for fired_total; keys a newer server adds
 * are camelCased the same way).
 */
export interface Stats {
  now: bigint;
  target: bigint;
  lag: bigint;
  timers: bigint;
  sessions: bigint;
  connections: bigint;
  receivers: bigint;
  backlogEvents: bigint;
  outboxEvents: bigint;
  waitingFirings: bigint;
  firedTotal: bigint;
  droppedTotal: bigint;
  /** estimated memory of the receiver records (0 from older servers) */
  receiverBytes: bigint;
  /** idle receivers in acknowledged mode kept for ack_retention_ticks (0 from older servers) */
  retainedReceivers: bigint;
  tickNs: bigint;
  speed: number;
  frozen: boolean;
  [key: string]: bigint | number | boolean;
}

/** camelCase turns a wire name into a result key: "fired_total" → "firedTotal". */
export function camelCase(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

const decoder = new Decoder({ useBigInt64: true });

function u64(v: unknown, what: string): bigint {
  if (v === null || v === undefined) return 0n;
  if (typeof v === "bigint") {
    if (v < 0n) throw new MalformedMessageError(`tickwheel: ${what}: negative`);
    return v;
  }
  if (typeof v === "number" && Number.isInteger(v) && v >= 0) return BigInt(v);
  throw new MalformedMessageError(`tickwheel: ${what}: want a non-negative integer, got ${typeof v}`);
}

function bool(v: unknown, what: string): boolean {
  if (v === null || v === undefined) return false;
  if (typeof v !== "boolean") throw new MalformedMessageError(`tickwheel: ${what}: want a bool`);
  return v;
}

function data(v: unknown, what: string): Uint8Array | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Uint8Array) return v.length === 0 ? null : v.slice();
  if (typeof v === "string") return v.length === 0 ? null : utf8.encode(v);
  throw new MalformedMessageError(`tickwheel: ${what}: want bin, str or nil`);
}

function str(v: unknown, what: string): string {
  if (typeof v === "string") return v;
  if (v instanceof Uint8Array) return new TextDecoder().decode(v);
  throw new MalformedMessageError(`tickwheel: ${what}: want str`);
}

function arr(v: unknown, min: number, what: string): unknown[] {
  if (!Array.isArray(v)) throw new MalformedMessageError(`tickwheel: ${what}: want an array`);
  if (v.length < min) throw new MalformedMessageError(`tickwheel: ${what}: array too short`);
  return v;
}

/**
 * decodeMessage decodes one server message payload. Elements after the
 * documented ones are ignored; a kind this client does not know gives
 * {kind: "unknown"}, which clients ignore.
 */
export function decodeMessage(payload: Uint8Array): Message {
  let v: unknown;
  try {
    v = decoder.decode(payload);
  } catch (e) {
    throw new MalformedMessageError(`tickwheel: malformed message: ${(e as Error).message}`);
  }
  const a = arr(v, 1, "message");
  const k = Number(u64(a[0], "kind"));
  switch (k) {
    case Kind.ok:
      arr(a, 3, "ok");
      return { kind: "ok", id: u64(a[1], "id"), result: arr(a[2], 0, "result") };
    case Kind.error:
      arr(a, 4, "error");
    {
      const code = Number(u64(a[2], "code"));
      const m: Message = { kind: "error", id: u64(a[1], "id"), code, message: str(a[3], "message") };
      if (code === NOT_LEADER) m.leader = a.length > 4 ? str(a[4], "leader") : "";
      return m;
    }
    case Kind.fire:
      arr(a, 9, "fire");
      return {
        kind: "fire", receiver: u64(a[1], "receiver"), tid: u64(a[2], "tid"), tick: u64(a[3], "tick"),
        fired: u64(a[4], "fired"), repeat: repeatOf(u64(a[5], "repeat")), last: bool(a[6], "last"),
        data: data(a[7], "data"), seq: u64(a[8], "seq"), late: u64(a[9], "late"),
      };
    case Kind.takeover:
      arr(a, 3, "takeover");
      return { kind: "takeover", receiver: u64(a[1], "receiver"), session: u64(a[2], "session") };
    case Kind.dropped:
      arr(a, 4, "dropped");
      return { kind: "dropped", receiver: u64(a[1], "receiver"), firstSeq: u64(a[2], "first_seq"), lastSeq: u64(a[3], "last_seq") };
  }
  return { kind: "unknown", kindCode: k };
}

/** decodeUints reads a result of uints; missing trailing ones read as 0 (older servers). */
export function decodeUints(result: unknown[], n: number, what: string): bigint[] {
  const out: bigint[] = [];
  for (let i = 0; i < n; i++) out.push(u64(result[i], what));
  return out;
}

function object(v: unknown, what: string): Record<string, unknown> {
  if (v === null || typeof v !== "object" || Array.isArray(v) || v instanceof Uint8Array) {
    throw new MalformedMessageError(`tickwheel: ${what}: want a map`);
  }
  return v as Record<string, unknown>;
}

/** decodeHello reads a hello result. Unknown limit keys are kept; missing ones are off. */
export function decodeHello(result: unknown[]): Hello {
  arr(result, 5, "hello result");
  const limits: Record<string, bigint> = {};
  for (const [k, v] of Object.entries(object(result[4], "limits"))) {
    if (typeof v === "bigint" || typeof v === "number") limits[k] = u64(v, k);
  }
  return {
    session: u64(result[0], "session"), now: u64(result[1], "now"), tickNs: u64(result[2], "tick_ns"),
    serverVersion: str(result[3], "server_version"), limits: limits as Limits,
  };
}

/** decodeTimer reads a timer array. */
export function decodeTimer(v: unknown): Timer {
  const a = arr(v, 9, "timer");
  return {
    receiver: u64(a[0], "receiver"), tid: u64(a[1], "tid"), due: u64(a[2], "due"),
    remaining: u64(a[3], "remaining"), every: u64(a[4], "every"), fired: u64(a[5], "fired"),
    repeat: repeatOf(u64(a[6], "repeat")), paused: bool(a[7], "paused"), data: data(a[8], "data"),
    // Three more elements when the timer has a schedule, zone or policy.
    schedule: a.length > 9 ? str(a[9], "schedule") : "", zone: a.length > 10 ? str(a[10], "zone") : "",
    missed: missedName(a.length > 11 ? u64(a[11], "missed") : 0n),
    group: a.length > 12 ? u64(a[12], "group") : 0n, // a 13th for a timer in a group
  };
}

/** missedName names a missed-firing policy; one this client does not know reads as "all". */
function missedName(v: bigint): keyof typeof Missed {
  return v === 1n ? "once" : v === 2n ? "skip" : "all";
}

/** decodeListPage reads a list result: the page and the next from_tid (0: no more). */
export function decodeListPage(result: unknown[]): { timers: Timer[]; next: bigint } {
  arr(result, 1, "list result");
  const timers = arr(result[0], 0, "timers").map(decodeTimer);
  return { timers, next: u64(result[1], "next") };
}

/** decodeListGroupPage reads a list_group result: the page and the next page's cursor ((0, 0): no more). */
export function decodeListGroupPage(result: unknown[]): { timers: Timer[]; nextReceiver: bigint; nextTid: bigint } {
  arr(result, 3, "list_group result");
  const timers = arr(result[0], 0, "timers").map(decodeTimer);
  return { timers, nextReceiver: u64(result[1], "next_receiver"), nextTid: u64(result[2], "next_tid") };
}

/** The result of the admin cluster op: the leader's raft state and the members. */
export interface ClusterState {
  role: string;
  leader: string;
  term: bigint;
  commitIndex: bigint;
  appliedIndex: bigint;
  members: { id: string; raftAddr: string; voter: boolean }[];
  /** check is the id of the state check a clusterCheck marked (0n otherwise). */
  check: bigint;
}

/** decodeCluster reads a cluster result; unknown keys are ignored. */
export function decodeCluster(result: unknown[]): ClusterState {
  arr(result, 1, "cluster result");
  const m = object(result[0], "cluster");
  const out: ClusterState = { role: "", leader: "", term: 0n, commitIndex: 0n, appliedIndex: 0n, members: [], check: 0n };
  if (m.role !== undefined) out.role = str(m.role, "role");
  if (m.leader !== undefined) out.leader = str(m.leader, "leader");
  if (m.term !== undefined) out.term = u64(m.term, "term");
  if (m.commit_index !== undefined) out.commitIndex = u64(m.commit_index, "commit_index");
  if (m.applied_index !== undefined) out.appliedIndex = u64(m.applied_index, "applied_index");
  if (m.check !== undefined) out.check = u64(m.check, "check");
  for (const e of m.members === undefined ? [] : arr(m.members, 0, "members")) {
    const o = object(e, "member");
    out.members.push({
      id: o.id === undefined ? "" : str(o.id, "id"),
      raftAddr: o.raft_addr === undefined ? "" : str(o.raft_addr, "raft_addr"),
      voter: o.voter === true,
    });
  }
  return out;
}

/** decodeStats reads a stats result, its keys in camelCase (see Stats). */
export function decodeStats(result: unknown[]): Stats {
  arr(result, 1, "stats result");
  const out: Record<string, bigint | number | boolean> = {
    now: 0n, target: 0n, lag: 0n, timers: 0n, sessions: 0n, connections: 0n, receivers: 0n,
    backlogEvents: 0n, outboxEvents: 0n, waitingFirings: 0n, firedTotal: 0n, droppedTotal: 0n,
    receiverBytes: 0n, retainedReceivers: 0n,
    tickNs: 0n, speed: 0, frozen: false,
  };
  for (const [name, v] of Object.entries(object(result[0], "stats"))) {
    const k = camelCase(name);
    if (k === "speed") out.speed = typeof v === "bigint" ? Number(v) : (v as number);
    else if (typeof v === "boolean") out[k] = v;
    else if (typeof v === "bigint" || (typeof v === "number" && Number.isInteger(v) && v >= 0)) out[k] = u64(v, name);
    else if (typeof v === "number") out[k] = v;
  }
  return out as Stats;
}

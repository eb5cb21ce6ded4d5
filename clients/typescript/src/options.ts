import type { AckMode } from "./acks.js";
import type { Event } from "./events.js";
import type { Missed, U64 } from "./protocol.js";

/** Options of connect. */
export interface ConnectOptions {
  /** The hello token: the client token, or the admin token for the admin ops. */
  token?: string;
  /** The client's name in the server's logs and stats. */
  name?: string;
  /** Reconnect backoff (exponential with jitter), or false to give up when the connection drops. Default 100 ms to 5 s. */
  reconnect?: false | { minMs?: number; maxMs?: number };
  /** Events held between the socket and the consumer before the client stops reading (default 1024). */
  eventBuffer?: number;
  /**
   * A handler called for each event, one at a time, in order (awaited when
   * it returns a promise). Without one, read events with `client.events()`.
   */
  onEvent?: (ev: Event) => void | Promise<void>;
  /** Largest frame accepted from the server, bytes (default 64 MiB). */
  maxFrame?: number;
  /** Aborts the first connect (its dial and its hello): connect rejects with its reason. */
  signal?: AbortSignal;
  /**
   * More server addresses ("host:port"), after those of connect's addr: the nodes of a cluster.
   * The client connects to the leader, following the followers' "not_leader" replies.
   */
  addrs?: string[];
  /** How many "not_leader" redirections are followed from one address before the next one is tried (default 3). */
  leaderHops?: number;
  /**
   * Bound of each connection attempt (dial and hello), ms (default 10000; 0: none). Without a signal,
   * connect retries while the nodes know no leader for at most this times the number of addresses.
   */
  dialTimeoutMs?: number;
  /**
   * Connect with TLS (node:tls), to a server with tls.cert_file: true trusts the
   * system's CAs; an object sets the CA(s) the server's certificate must chain to (ca,
   * PEM), the client certificate and key for a server with mTLS (cert, key, PEM), and
   * the name the server's certificate must be valid for (servername; default the
   * address's host). Default: plaintext.
   */
  tls?: boolean | TLSOptions;
}

/** TLS settings of connect (see ConnectOptions.tls); PEM strings or Buffers, as node:tls takes them. */
export interface TLSOptions {
  ca?: string | Buffer | Array<string | Buffer>;
  cert?: string | Buffer;
  key?: string | Buffer;
  servername?: string;
}

/** Every call takes a signal: when it aborts, the call rejects with its reason (the request may still be applied). */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Options of clusterAdd. */
export interface ClusterAddOptions extends CallOptions {
  /** Keep the node a non-voter (a read replica) rather than promote it once it has caught up. */
  nonvoter?: boolean;
}

/** Optional parts of a timer. */
export interface AddOptions extends CallOptions {
  /** Ticks between firings; 0 (default) means the first delay. */
  every?: U64;
  /**
   * Number of firings: 1 by default (once), or "forever" until cancelled. At most 2^32-1.
   * Timers from get/list and fire events read it back the same way: a count, or "forever".
   */
  repeat?: number | "forever";
  /** Delivered with every firing (a string is sent as its UTF-8 bytes); at most limits.max_data bytes. */
  data?: Uint8Array | string;
  /** Replace an existing timer of the same (receiver, tid); without it that is an "exists" error. */
  replace?: boolean;
  /** First delay as tw-time nanoseconds from when the server applies the add (servers that know after_ns). */
  afterNs?: U64;
  /** A cron schedule (servers that know schedules). */
  schedule?: string;
  /** The IANA zone of schedule (default UTC). */
  zone?: string;
  /** What a repeating timer does with firings missed while the server was down. */
  missed?: keyof typeof Missed;
  /**
   * Puts the timer in a group (a match id, say; 0, the default: none), for cancelGroup,
   * pauseGroup, resumeGroup and listGroup. Added to a paused group or receiver, it starts paused.
   */
  group?: U64;
}

/** Optional parts of a bind. */
export interface BindOptions extends CallOptions {
  /** Cancel the receiver's timers when this session ends (a lost connection too). */
  ephemeral?: boolean;
  /** Acknowledged mode: "auto" (the client acks what the consumer finished), "manual" (client.ack), or "none". */
  ack?: AckMode;
}

/** What the server answered a bind. */
export interface BindResult {
  /** Events that follow the reply, before any newer one of the receiver. */
  pending: bigint;
  /** Events of the receiver the server gave up on since it was last bound (also delivered as a "dropped" event). */
  dropped: bigint;
  /** Seq of the next event delivered (0 from servers before acknowledged mode). */
  firstSeq: bigint;
}
